/* size_arg.h -- a size on the command line of the benchmark programs (mpibench,
 * mpicoll, limits): a number with an optional k, m or g suffix (powers of 1024). */
#ifndef RMCA_BENCH_SIZE_ARG_H
#define RMCA_BENCH_SIZE_ARG_H

#include <stddef.h>
#include <stdlib.h>

/* The bytes `s` names; *ok = 0 (and 0 returned) when it is not such a size. */
static inline size_t size_arg(const char *s, int *ok)
{
    char *end;
    unsigned long long v = strtoull(s, &end, 0);
    if (*end == 'k' || *end == 'K')
        v <<= 10, end++;
    else if (*end == 'm' || *end == 'M')
        v <<= 20, end++;
    else if (*end == 'g' || *end == 'G')
        v <<= 30, end++;
    *ok = end != s && !*end;
    return *ok ? (size_t)v : 0;
}

/* size_arg for a program whose `fail(message)` does not return. */
static inline size_t size_arg_or_fail(const char *s, void (*fail)(const char *))
{
    int ok;
    size_t v = size_arg(s, &ok);
    if (!ok)
        fail("bad size argument");
    return v;
}

#endif
