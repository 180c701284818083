/*
 * Function-like macros of Open MPI that bindgen cannot translate, wrapped as
 * real functions with an `rmca_` prefix. Each wrapper is one macro, no logic.
 */
#ifndef RMCA_OMPI_SHIM_H
#define RMCA_OMPI_SHIM_H

#include "ompi.h"

/* OBJ_CONSTRUCT / OBJ_DESTRUCT on memory we own (descriptors, lists). */
void rmca_obj_construct(opal_object_t *object, opal_class_t *cls);
void rmca_obj_destruct(opal_object_t *object);

/* OPAL_MODEX_SEND with PMIX_GLOBAL scope: publish a component's contact blob. */
int rmca_modex_send(const mca_base_component_t *component, const void *data, size_t size);
/* OPAL_MODEX_RECV: a peer's blob for the same component. *data is malloc'ed; free it. */
int rmca_modex_recv(const mca_base_component_t *component, const opal_proc_t *proc,
                    void **data, size_t *size);

/* opal_output with a preformatted string (no varargs across the FFI). */
void rmca_output(int stream, const char *message);

/* opal_show_help_string: the rendered text (malloc'ed; free it), or NULL. */
char *rmca_show_help_string(const char *file, const char *topic, int want_error_header,
                            const char *a0, const char *a1, const char *a2, const char *a3,
                            const char *a4, const char *a5, const char *a6, const char *a7);

/* OPAL_PROC_ON_LOCAL_NODE(proc->proc_flags) */
int rmca_proc_on_local_node(const opal_proc_t *proc);
/* opal_proc_for_name of the name hashed as jobid << 32 | vpid (the runtime creates the
 * process object if it has none yet, as for a sender a BTL hears from first); NULL if
 * the runtime cannot. */
opal_proc_t *rmca_proc_for_name_hash(uint64_t hash);
/* 1 while MPI_Init (or MPI_Init_thread) runs, 0 when Open MPI was started otherwise (an
 * MPI Session), -1 when the process has no MPI library state (a tool). */
int rmca_mpi_init_running(void);
/* In a build with GPU RDMA support (OPAL_CUDA_GDR_SUPPORT), the GPU eager limit the BTL
 * base registered for `component` (btl_<name>_cuda_eager_limit on 4.1,
 * btl_<name>_accelerator_eager_limit on 5.0) set to SIZE_MAX, which ob1 turns into its
 * header size: every device message by rendezvous, as smcuda has it. Only while the
 * variable holds its default (a user's value stays). Returns 1 if set, else 0. */
int rmca_btl_device_rendezvous_default(const mca_base_component_t *component,
                                       mca_btl_base_module_t *module);
/* OPAL_PROC_MY_NAME hashed as jobid << 32 | vpid: a stable 64-bit identity. */
uint64_t rmca_proc_name_hash(const opal_proc_t *proc);
uint64_t rmca_my_name_hash(void);

/* Communicators made from groups (MPI Sessions, Open MPI 5): each member has its own
 * index of such a communicator, and a message carries its receiver's. Publish puts this
 * process's index through PMIx under a key named by the communicator's 128-bit id, once,
 * when the MTL adds the communicator; remote looks up `dest`'s (blocking in PMIx_Get
 * until `dest` has published it, at most `timeout_s`) and keeps it in the communicator
 * (c_index_vec, Open MPI's own cache of remote indices). Only for a communicator whose
 * members index it differently (not OMPI_COMM_IS_GLOBAL_INDEX: the caller checks);
 * OMPI_ERR_NOT_SUPPORTED on 4.1, which has none. */
int rmca_comm_publish_index(ompi_communicator_t *comm);
int rmca_comm_remote_index(ompi_communicator_t *comm, int dest, uint32_t timeout_s,
                           uint32_t *index);

/* opal_pmix.register_cleanup(path, false, false, false): the PMIx server removes the file
 * when this process terminates, however it ends (as vader registers its segments).
 * OPAL_ERR_NOT_SUPPORTED when the PMIx component offers no cleanup. */
int rmca_register_cleanup(const char *path);


#endif
