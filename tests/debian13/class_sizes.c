/*
 * class_sizes.c -- what the Open MPI this process loaded says of its object classes.
 *
 * For each type name given, prints "<name> <cls_sizeof>" from its exported descriptor
 * <name>_class (0 when the library does not export it), after the lines "library
 * <path>" (the file libopen-pal was loaded from) and "cuda <0|1>" (the library's
 * opal_built_with_cuda_support, which the layout check compares before the sizes: a
 * CUDA-aware build's BTL module has more fields, and the module has no descriptor).
 * Compiled once against one installation's headers (for opal_class_t) and run against
 * either library of the same release (LD_LIBRARY_PATH picks which): two builds whose
 * lines agree lay out those structures alike. tests/debian13/cross-build predicts from
 * this, independently of ours, whether a component of one build must run in the other
 * or be refused.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdbool.h>
#include <stdio.h>

#include <mpi.h>
#include "opal/class/opal_object.h"

int main(int argc, char **argv)
{
    /* A call into libmpi, so that the link keeps it (and libopen-pal under it)
     * whatever the linker's --as-needed default; MPI_Initialized needs no MPI_Init. */
    int initialized = 0;
    MPI_Initialized(&initialized);

    Dl_info where;
    const void *object = dlsym(RTLD_DEFAULT, "opal_object_t_class");
    if (object == NULL || dladdr(object, &where) == 0 || where.dli_fname == NULL) {
        fprintf(stderr, "class_sizes: opal_object_t_class is not in this process\n");
        return 1;
    }
    printf("library %s\n", where.dli_fname);
    const bool *cuda = dlsym(RTLD_DEFAULT, "opal_built_with_cuda_support");
    if (cuda == NULL) {
        fprintf(stderr, "class_sizes: libopen-pal exports no opal_built_with_cuda_support\n");
        return 1;
    }
    printf("cuda %d\n", *cuda ? 1 : 0);
    for (int i = 1; i < argc; i++) {
        char symbol[256];
        if (snprintf(symbol, sizeof symbol, "%s_class", argv[i]) >= (int) sizeof symbol) {
            fprintf(stderr, "class_sizes: type name too long: %s\n", argv[i]);
            return 2;
        }
        const opal_class_t *class = dlsym(RTLD_DEFAULT, symbol);
        printf("%s %zu\n", argv[i], class != NULL ? class->cls_sizeof : (size_t) 0);
    }
    return 0;
}
