/*
 * Run at build time: prints, as Rust constants, the version fields that the
 * framework macros (MCA_BTL_BASE_VERSION_3_1_0, MCA_MTL_BASE_VERSION_2_0_0)
 * put into a component structure, so the Rust component declarations carry
 * exactly what a C component compiled against the same headers would.
 */
#include <stdio.h>
#include "ompi.h"
#include "ompi/mca/mca.h"

#if OPAL_MAJOR_VERSION >= 5
static const mca_base_component_t btl = {MCA_BTL_BASE_VERSION_3_3_0};
#else
static const mca_base_component_t btl = {MCA_BTL_BASE_VERSION_3_1_0};
#endif
/* 5.0 has no build-time CUDA flavour: CUDA is a run-time accelerator component. */
#ifndef OPAL_CUDA_SUPPORT
#define OPAL_CUDA_SUPPORT 0
#endif
static const mca_base_component_t mtl = {MCA_MTL_BASE_VERSION_2_0_0};

static void emit(const char *prefix, const mca_base_component_t *c)
{
    printf("pub const %s_MCA_VERSION: [i32; 3] = [%d, %d, %d];\n", prefix,
           c->mca_major_version, c->mca_minor_version, c->mca_release_version);
    printf("pub const %s_PROJECT_NAME: &str = \"%s\";\n", prefix, c->mca_project_name);
    printf("pub const %s_PROJECT_VERSION: [i32; 3] = [%d, %d, %d];\n", prefix,
           c->mca_project_major_version, c->mca_project_minor_version,
           c->mca_project_release_version);
    printf("pub const %s_TYPE_NAME: &str = \"%s\";\n", prefix, c->mca_type_name);
    printf("pub const %s_TYPE_VERSION: [i32; 3] = [%d, %d, %d];\n", prefix,
           c->mca_type_major_version, c->mca_type_minor_version, c->mca_type_release_version);
}

int main(void)
{
    emit("BTL", &btl);
    emit("MTL", &mtl);
    /* The component's own version: that of the Open MPI it was built against. */
    printf("pub const BUILT_AGAINST_VERSION: [i32; 3] = [%d, %d, %d];\n", OPAL_MAJOR_VERSION,
           OPAL_MINOR_VERSION, OPAL_RELEASE_VERSION);
    printf("pub const BUILT_AGAINST_VERSION_STRING: &str = \"%d.%d.%d%s\";\n", OPAL_MAJOR_VERSION,
           OPAL_MINOR_VERSION, OPAL_RELEASE_VERSION, OPAL_GREEK_VERSION);
    printf("pub const BUILT_WITH_CUDA_SUPPORT: bool = %s;\n", OPAL_CUDA_SUPPORT ? "true" : "false");
    printf("pub const BUILT_WITH_DEBUG: bool = %s;\n", OPAL_ENABLE_DEBUG ? "true" : "false");
    return 0;
}
