#include "shim.h"

#include <dlfcn.h>
#include <inttypes.h>
#include <stdio.h>

#include "ompi/runtime/mpiruntime.h"

void rmca_obj_construct(opal_object_t *object, opal_class_t *cls)
{
    OBJ_CONSTRUCT_INTERNAL(object, cls);
}

void rmca_obj_destruct(opal_object_t *object)
{
    OBJ_DESTRUCT(object);
}

int rmca_modex_send(const mca_base_component_t *component, const void *data, size_t size)
{
    int rc;
#if OPAL_MAJOR_VERSION >= 5
    OPAL_MODEX_SEND(rc, PMIX_GLOBAL, component, data, size);
#else
    OPAL_MODEX_SEND(rc, OPAL_PMIX_GLOBAL, component, data, size);
#endif
    return rc;
}

int rmca_modex_recv(const mca_base_component_t *component, const opal_proc_t *proc,
                    void **data, size_t *size)
{
    int rc;
    OPAL_MODEX_RECV(rc, component, &proc->proc_name, data, size);
    return rc;
}

void rmca_output(int stream, const char *message)
{
    opal_output(stream, "%s", message);
}

char *rmca_show_help_string(const char *file, const char *topic, int want_error_header,
                            const char *a0, const char *a1, const char *a2, const char *a3,
                            const char *a4, const char *a5, const char *a6, const char *a7)
{
    return opal_show_help_string(file, topic, want_error_header, a0, a1, a2, a3, a4, a5, a6,
                                 a7);
}

int rmca_proc_on_local_node(const opal_proc_t *proc)
{
    return OPAL_PROC_ON_LOCAL_NODE(proc->proc_flags) ? 1 : 0;
}

static uint64_t hash_name(const opal_process_name_t *name)
{
    return ((uint64_t) name->jobid << 32) | (uint64_t) name->vpid;
}

uint64_t rmca_proc_name_hash(const opal_proc_t *proc)
{
    return hash_name(&proc->proc_name);
}

opal_proc_t *rmca_proc_for_name_hash(uint64_t hash)
{
    opal_process_name_t name;
    name.jobid = (opal_jobid_t) (hash >> 32);
    name.vpid = (opal_vpid_t) (hash & 0xffffffffu);
    return NULL == opal_proc_for_name ? NULL : opal_proc_for_name(name);
}

int rmca_mpi_init_running(void)
{
    /* Looked up, not linked: ompi_info loads components too. */
    const volatile int32_t *state = (const volatile int32_t *) dlsym(RTLD_DEFAULT,
                                                                       "ompi_mpi_state");
    if (NULL == state)
        return -1;
    return OMPI_MPI_STATE_INIT_STARTED == *state ? 1 : 0;
}

int rmca_btl_device_rendezvous_default(const mca_base_component_t *component,
                                       mca_btl_base_module_t *module)
{
#if OPAL_CUDA_GDR_SUPPORT
#    if OPAL_MAJOR_VERSION >= 5
    const char *variable = "accelerator_eager_limit";
    size_t *limit = &module->btl_accelerator_eager_limit;
#    else
    const char *variable = "cuda_eager_limit";
    size_t *limit = &module->btl_cuda_eager_limit;
#    endif
    mca_base_var_source_t source = MCA_BASE_VAR_SOURCE_DEFAULT;
    int index = mca_base_var_find("opal", "btl", component->mca_component_name, variable);
    if (index < 0 || OPAL_SUCCESS != mca_base_var_get_value(index, NULL, &source, NULL)
        || MCA_BASE_VAR_SOURCE_DEFAULT != source)
        return 0;
    *limit = SIZE_MAX;
    return 1;
#else
    (void) component;
    (void) module;
    return 0;
#endif
}

uint64_t rmca_my_name_hash(void)
{
    return hash_name(&OPAL_PROC_MY_NAME);
}

int rmca_register_cleanup(const char *path)
{
#if OPAL_MAJOR_VERSION >= 5
    /* 5.0 calls PMIx directly: the function always exists. */
    return opal_pmix_register_cleanup((char *) path, false, false, false);
#else
    if (NULL == opal_pmix.register_cleanup)
        return OPAL_ERR_NOT_SUPPORTED;
    return opal_pmix.register_cleanup((char *) path, false, false, false);
#endif
}

#if OMPI_MAJOR_VERSION >= 5
/* The PMIx key of this communicator's per-process index: its 128-bit id, which every
 * member agrees on. */
static void comm_index_key(const ompi_communicator_t *comm, char key[PMIX_MAX_KEYLEN + 1])
{
    snprintf(key, PMIX_MAX_KEYLEN + 1, "rmca.cid.%016" PRIx64 ".%016" PRIx64,
             comm->c_contextid.cid_base, comm->c_contextid.cid_sub.u64);
}
#endif

int rmca_comm_publish_index(ompi_communicator_t *comm)
{
#if OMPI_MAJOR_VERSION >= 5
    char key[PMIX_MAX_KEYLEN + 1];
    comm_index_key(comm, key);
    uint32_t index = comm->c_index;
    int rc;
    OPAL_MODEX_SEND_VALUE(rc, PMIX_GLOBAL, key, &index, PMIX_UINT32);
    if (PMIX_SUCCESS == rc)
        rc = PMIx_Commit();
    return PMIX_SUCCESS == rc ? OMPI_SUCCESS : opal_pmix_convert_status(rc);
#else
    (void) comm;
    return OMPI_ERR_NOT_SUPPORTED;
#endif
}

int rmca_comm_remote_index(ompi_communicator_t *comm, int dest, uint32_t timeout_s,
                           uint32_t *index)
{
#if OMPI_MAJOR_VERSION >= 5
    if (NULL != comm->c_index_vec && 0 != comm->c_index_vec[dest]) {
        *index = comm->c_index_vec[dest];
        return OMPI_SUCCESS;
    }
    char key[PMIX_MAX_KEYLEN + 1];
    comm_index_key(comm, key);
    pmix_proc_t peer;
    OPAL_PMIX_CONVERT_NAME(&peer, &ompi_comm_peer_lookup(comm, dest)->super.proc_name);
    pmix_info_t info;
    PMIX_INFO_CONSTRUCT(&info);
    PMIX_INFO_LOAD(&info, PMIX_TIMEOUT, &timeout_s, PMIX_UINT32);
    pmix_value_t *value = NULL;
    int rc = PMIx_Get(&peer, key, &info, 1, &value);
    PMIX_INFO_DESTRUCT(&info);
    if (PMIX_SUCCESS == rc && (NULL == value || PMIX_UINT32 != value->type))
        rc = PMIX_ERR_TYPE_MISMATCH;
    if (PMIX_SUCCESS == rc) {
        *index = value->data.uint32;
        if (NULL != comm->c_index_vec)
            comm->c_index_vec[dest] = *index;
    }
    if (NULL != value)
        PMIX_VALUE_RELEASE(value);
    return PMIX_SUCCESS == rc ? OMPI_SUCCESS : opal_pmix_convert_status(rc);
#else
    (void) comm;
    (void) dest;
    (void) timeout_s;
    (void) index;
    return OMPI_ERR_NOT_SUPPORTED;
#endif
}
