/*
 * Redis's two ways of reading a double, with the same libc strtod, so that
 * exactly the strings Redis accepts are accepted (hex floats, "inf",
 * overflow and underflow rules): Rust's float parser differs on all three.
 */
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>

/*
 * Redis's string2d (util.c), used for scores (ZADD, ZINCRBY): the whole
 * string, no leading space, no NaN, and no result that overflowed to
 * infinity or underflowed to zero. `s` must be NUL-terminated at s[slen].
 */
int tally_string2d(const char *s, size_t slen, double *dp) {
    char *eptr;
    errno = 0;
    *dp = strtod(s, &eptr);
    if (slen == 0 || isspace((unsigned char)s[0]) || (size_t)(eptr - s) != slen ||
        (errno == ERANGE && (*dp == HUGE_VAL || *dp == -HUGE_VAL || fpclassify(*dp) == FP_ZERO)) ||
        isnan(*dp))
        return 0;
    return 1;
}

/*
 * zslParseRange's reading of a score bound (t_zset.c): strtod up to the end
 * of the C string (a NUL inside the argument ends it), NaN refused, overflow
 * allowed. `s` must be NUL-terminated.
 */
int tally_strtod_bound(const char *s, double *dp) {
    char *eptr;
    *dp = strtod(s, &eptr);
    if (eptr[0] != '\0' || isnan(*dp)) return 0;
    return 1;
}

/* A SORT weight, as Redis 7.0's sortCommandGeneric reads one: strtod to the
 * end of the C string, NaN and out-of-range values (ERANGE, overflow and
 * underflow alike) refused. The empty string reads as 0, as it does there. */
int tally_strtod_sort_weight(const char *s, double *dp) {
    char *eptr;
    errno = 0;
    *dp = strtod(s, &eptr);
    if (eptr[0] != '\0' || errno == ERANGE || isnan(*dp)) return 0;
    return 1;
}
