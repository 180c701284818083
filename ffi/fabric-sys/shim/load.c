/*
 * libfabric loaded when a component first needs it, not when the component is loaded.
 *
 * Linked as a dependency, libfabric.so.1 came into every process that loads rusnic,
 * which Open MPI does in every job whose BTL list does not exclude it, ob1 over vader
 * included; Debian's libfabric pulls in libpsm2 and libinfinipath, whose initialisers
 * sleep for about 0.2 s. Here the six functions our components call directly are
 * reached through pointers bound on first use, each at the symbol version the linker
 * would have chosen from the library the build found (RMCA_FI_<NAME>_VERSION, from
 * build.rs); everything else is dispatch through the objects those functions return.
 *
 * The build renames the functions in libfabric's headers (fi_getinfo becomes
 * rmca_fi_getinfo, build.rs), so the prototypes below are libfabric's own and every
 * caller, the static-inline wrappers included, comes here.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include <rdma/fabric.h>
#include <rdma/fi_errno.h>

#define HIDDEN __attribute__((visibility("hidden")))

static pthread_once_t once = PTHREAD_ONCE_INIT;
static char failure[512];
static int loaded;

static int (*real_getinfo)(uint32_t, const char *, const char *, uint64_t,
                           const struct fi_info *, struct fi_info **);
static void (*real_freeinfo)(struct fi_info *);
static struct fi_info *(*real_dupinfo)(const struct fi_info *);
static int (*real_fabric)(struct fi_fabric_attr *, struct fid_fabric **, void *);
static const char *(*real_strerror)(int);
static uint32_t (*real_version)(void);

/* The symbol `name` at `version` ("" when the library has no versions): NULL, with the
 * reason in `failure`, when the library lacks it. */
static void *bind_symbol(void *lib, const char *name, const char *version)
{
    void *sym = version[0] ? dlvsym(lib, name, version) : dlsym(lib, name);
    if (sym == NULL && failure[0] == '\0') {
        snprintf(failure, sizeof failure,
                 "the libfabric.so.1 loaded has no %s%s%s, which this component was built "
                 "to call (it is older than the libfabric the component was built "
                 "against: put that one first on LD_LIBRARY_PATH, or rebuild)",
                 name, version[0] ? "@" : "", version);
    }
    return sym;
}

static void load(void)
{
    /* NODELETE: a component unloaded by Open MPI leaves the library to the next one
     * (the ofi MTL, rofi) instead of making it load and initialise again. */
    void *lib = dlopen("libfabric.so.1", RTLD_NOW | RTLD_GLOBAL | RTLD_NODELETE);
    if (lib == NULL) {
        const char *why = dlerror();
        snprintf(failure, sizeof failure, "libfabric.so.1 could not be loaded: %s",
                 why ? why : "unknown error");
        return;
    }
    *(void **) &real_getinfo = bind_symbol(lib, "fi_getinfo", RMCA_FI_GETINFO_VERSION);
    *(void **) &real_freeinfo = bind_symbol(lib, "fi_freeinfo", RMCA_FI_FREEINFO_VERSION);
    *(void **) &real_dupinfo = bind_symbol(lib, "fi_dupinfo", RMCA_FI_DUPINFO_VERSION);
    *(void **) &real_fabric = bind_symbol(lib, "fi_fabric", RMCA_FI_FABRIC_VERSION);
    *(void **) &real_strerror = bind_symbol(lib, "fi_strerror", RMCA_FI_STRERROR_VERSION);
    *(void **) &real_version = bind_symbol(lib, "fi_version", RMCA_FI_VERSION_VERSION);
    loaded = failure[0] == '\0';
}

/* NULL once libfabric is loaded with every function bound, else why not. */
HIDDEN const char *rmca_fabric_load(void)
{
    pthread_once(&once, load);
    return loaded ? NULL : failure;
}

HIDDEN int rmca_fi_getinfo(uint32_t version, const char *node, const char *service,
                           uint64_t flags, const struct fi_info *hints, struct fi_info **info)
{
    if (rmca_fabric_load() != NULL) {
        return -FI_ENOSYS;
    }
    return real_getinfo(version, node, service, flags, hints, info);
}

HIDDEN void rmca_fi_freeinfo(struct fi_info *info)
{
    if (rmca_fabric_load() == NULL) {
        real_freeinfo(info);
    }
}

HIDDEN struct fi_info *rmca_fi_dupinfo(const struct fi_info *info)
{
    return rmca_fabric_load() == NULL ? real_dupinfo(info) : NULL;
}

HIDDEN int rmca_fi_fabric(struct fi_fabric_attr *attr, struct fid_fabric **fabric,
                          void *context)
{
    if (rmca_fabric_load() != NULL) {
        return -FI_ENOSYS;
    }
    return real_fabric(attr, fabric, context);
}

HIDDEN const char *rmca_fi_strerror(int errnum)
{
    const char *why = rmca_fabric_load();
    return why == NULL ? real_strerror(errnum) : why;
}

HIDDEN uint32_t rmca_fi_version(void)
{
    return rmca_fabric_load() == NULL ? real_version() : 0;
}
