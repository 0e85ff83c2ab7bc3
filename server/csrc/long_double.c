/*
 * INCRBYFLOAT arithmetic in C's long double, exactly as Redis 7.0 does it.
 *
 * Redis parses both operands with strtold, adds them in long double (80-bit
 * extended precision on x86-64) and prints the sum with "%.17Lf", trimming
 * trailing zeros. Rust has no long double, and its f64 result differs in the
 * last digits (12345.6 becomes 12345.59999999999999964 in Redis), so this
 * shim lets the same libc do the same arithmetic.
 */
#include <ctype.h>
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
 * Adds the decimal strings a and b. Writes the sum in Redis's LD_STR_HUMAN form
 * to out and returns its length; returns -1 when an operand is not a valid
 * float, -2 when the sum is NaN or infinite, -3 when out is too small.
 */
int tally_long_double_add(const char *a, size_t alen, const char *b, size_t blen,
                          char *out, size_t outlen) {
    long double x, y, sum;
    int len;
    if (!parse_long_double(a, alen, &x) || !parse_long_double(b, blen, &y)) return -1;
    sum = x + y;
    if (isnan(sum) || isinf(sum)) return -2;
    len = snprintf(out, outlen, "%.17Lf", sum);
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
 * Formats a double as C's "%.<precision>g": Redis 7.0 formats script
 * arguments and double replies with 17 digits, lua-cjson numbers with 14.
 * Returns the length written.
 */
int tally_format_g(double value, int precision, char *out, size_t outlen) {
    return snprintf(out, outlen, "%.*g", precision, value);
}
