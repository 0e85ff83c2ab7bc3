/*
 * INCRBYFLOAT's (and INCREX BYFLOAT's) arithmetic in C's long double, exactly
 * as Redis does it.
 *
 * Redis parses both operands with strtold, adds them in long double (80-bit
 * extended precision on x86-64) and prints the sum with "%.17Lf", trimming
 * trailing zeros. Rust has no long double, and its f64 result differs in the
 * last digits (12345.6 becomes 12345.59999999999999964 in Redis), so this
 * shim lets the same libc do the same arithmetic.
 */
#include <ctype.h>
#include <float.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>

#define MAX_LONG_DOUBLE_CHARS (5 * 1024)

/* Redis's string2ld. */
static int parse_long_double(const char *s, size_t slen, long double *out) {
    char buf[MAX_LONG_DOUBLE_CHARS];
    char *end;
    long double value;
    if (slen == 0 || slen >= sizeof(buf)) return 0;
    memcpy(buf, s, slen);
    buf[slen] = '\0';
    errno = 0;
    value = strtold(buf, &end);
    if (isspace((unsigned char)buf[0]) || end[0] != '\0' || (size_t)(end - buf) != slen ||
        (errno == ERANGE &&
         (value == HUGE_VALL || value == -HUGE_VALL || fpclassify(value) == FP_ZERO)) ||
        isnan(value))
        return 0;
    *out = value;
    return 1;
}

/*
 * Writes value in Redis's LD_STR_HUMAN form ("%.17Lf" without trailing
 * zeros, "-0" as "0") to out; returns its length, or -3 when out is too
 * small.
 */
static int format_human(long double value, char *out, size_t outlen) {
    int len = snprintf(out, outlen, "%.17Lf", value);
    if (len < 0 || (size_t)len + 1 > outlen) return -3;
    if (strchr(out, '.') != NULL) {
        char *p = out + len - 1;
        while (*p == '0') {
            p--;
            len--;
        }
        if (*p == '.') len--;
    }
    if (len == 2 && out[0] == '-' && out[1] == '0') {
        out[0] = '0';
        len = 1;
    }
    return len;
}

/*
 * Writes a double in Redis's LD_STR_HUMAN form, as addReplyHumanLongDouble
 * prints it once promoted to long double (GEOPOS's coordinates); returns its
 * length, or -3 when out is too small.
 */
int tally_format_human_double(double value, char *out, size_t outlen) {
    return format_human((long double)value, out, outlen);
}

/*
 * Adds the decimal strings a and b. Writes the sum in Redis's LD_STR_HUMAN form
 * to out and returns its length; returns -1 when an operand is not a valid
 * float, -2 when the sum is NaN or infinite, -3 when out is too small.
 */
int tally_long_double_add(const char *a, size_t alen, const char *b, size_t blen,
                          char *out, size_t outlen) {
    long double x, y, sum;
    if (!parse_long_double(a, alen, &x) || !parse_long_double(b, blen, &y)) return -1;
    sum = x + y;
    if (isnan(sum) || isinf(sum)) return -2;
    return format_human(sum, out, outlen);
}

/*
 * INCREX's BYFLOAT arithmetic (Redis 8.8), in long double as Redis does it.
 *
 * current is the stored value ("0" for a missing key); lower and upper are
 * the bounds, or NULL for the type's limits (-LDBL_MAX, LDBL_MAX). A sum
 * outside the bounds, or past the type's limits, is skipped (returns 1, the
 * key stays as it is) unless saturate, which clamps it to the bound it
 * crossed (returns 0). Either way value_out gets the value the key holds
 * afterwards and delta_out the increment applied, in LD_STR_HUMAN form,
 * with their lengths in *value_len and *delta_len.
 *
 * Errors: -1 the increment or a bound is not a finite float, -2 the
 * applied increment would be infinite, -3 a buffer is too small, -4 the
 * lower bound is above the upper one, -5 current is not a float. Only the
 * arguments are checked (and nothing written) when current is NULL, so a
 * caller can refuse bad arguments before it looks the key up.
 */
int tally_long_double_increx(const char *current, size_t current_len, const char *incr,
                             size_t incr_len, const char *lower, size_t lower_len,
                             const char *upper, size_t upper_len, int saturate, char *value_out,
                             char *delta_out, size_t outlen, int *value_len, int *delta_len) {
    long double old, by, lb = -LDBL_MAX, ub = LDBL_MAX, value, delta;
    int skipped = 0;
    if (!parse_long_double(incr, incr_len, &by) || isinf(by)) return -1;
    if (lower != NULL && (!parse_long_double(lower, lower_len, &lb) || isinf(lb))) return -1;
    if (upper != NULL && (!parse_long_double(upper, upper_len, &ub) || isinf(ub))) return -1;
    if (lb > ub) return -4;
    if (current == NULL) return 0;
    if (!parse_long_double(current, current_len, &old)) return -5;
    value = old + by;
    if (isinf(value) || value < lb || value > ub) {
        if (!saturate) {
            skipped = 1;
            value = old;
        } else if (isinf(value)) {
            value = by >= 0 ? ub : lb;
        } else {
            value = value > ub ? ub : lb;
        }
    }
    delta = skipped ? 0 : value - old;
    if (isinf(delta) || isnan(delta)) return -2;
    *value_len = format_human(value, value_out, outlen);
    *delta_len = format_human(delta, delta_out, outlen);
    if (*value_len < 0 || *delta_len < 0) return -3;
    return skipped;
}

/*
 * Formats a double as C's "%.<precision>g": Redis 7.0 formats script
 * arguments and double replies with 17 digits, lua-cjson numbers with 14.
 * Returns the length written.
 */
int tally_format_g(double value, int precision, char *out, size_t outlen) {
    return snprintf(out, outlen, "%.*g", precision, value);
}

/* A blocking command's timeout in seconds, as Redis 7.0's
 * getTimeoutFromObjectOrReply reads it: string2ld, then
 * (long long) ceill(seconds * 1000). The conversion of a value past the
 * range of long long is the machine's (on x86-64 the "integer indefinite",
 * LLONG_MIN), so a huge timeout is refused as negative here exactly when it
 * is in Redis. Returns 0 when the text is not a float. */
int tally_timeout_ms(const char *s, size_t slen, long long *out) {
    long double seconds;
    if (!parse_long_double(s, slen, &seconds)) return 0;
    *out = (long long) ceill(seconds * 1000.0);
    return 1;
}
