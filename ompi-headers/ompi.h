/*
 * Umbrella header for ffi/ompi-sys: exactly what our components bind from the
 * installed Open MPI. Each include says why it is here. opal_config.h comes
 * first because it fixes every struct layout (OPAL_ENABLE_DEBUG, OPAL_CUDA_SUPPORT).
 */
#include "opal_config.h"
/* Version macros first: the series decides where some headers live (4.1 vs 5.0). */
#include "opal/version.h"

/* Objects, lists and free lists: descriptors are opal_free_list_item_t's. */
#include "opal/class/opal_object.h"
#include "opal/class/opal_list.h"
#include "opal/class/opal_free_list.h"
/* add_procs marks reachable peers in an opal_bitmap_t. */
#include "opal/class/opal_bitmap.h"
/* Atomics and mutexes (opal_using_threads, memory barriers). */
#include "opal/sys/atomic.h"
#if OPAL_MAJOR_VERSION >= 5
#include "opal/mca/threads/mutex.h"
#else
#include "opal/threads/mutex.h"
#endif

/* Version macros and the runtime version string (version-mismatch refusal). */
#include "opal/version.h"
#include "opal/runtime/opal.h"
/* opal_built_with_cuda_support: the CUDA flavour of the running libopen-pal. */
#include "opal/runtime/opal_params.h"
#if OPAL_MAJOR_VERSION >= 5
/* 5.0 moves GPU support into a run-time framework: which accelerator component
 * (cuda, rocm, ze, null) was selected decides whether a BTL may use CUDA. */
#include "opal/mca/accelerator/base/base.h"
#endif
/* Progress registration. */
#include "opal/runtime/opal_progress.h"
/* Output streams and show_help. */
#include "opal/util/output.h"
#include "opal/util/show_help.h"
/* Processes: opal_proc_t, names, locality. */
#include "opal/util/proc.h"
/* Modex (OPAL_MODEX_SEND/RECV) through the PMIx framework. */
#if OPAL_MAJOR_VERSION >= 5
#include "opal/mca/pmix/pmix-internal.h"
#else
#include "opal/mca/pmix/pmix.h"
#endif
/* Data layout of user buffers. */
#include "opal/datatype/opal_convertor.h"
/* hwloc topology already loaded by Open MPI. */
#include "opal/mca/hwloc/base/base.h"

/* MCA base: component structure, variables, MPI_T performance variables. */
#include "opal/mca/mca.h"
#include "opal/mca/base/base.h"
#include "opal/mca/base/mca_base_var.h"
#include "opal/mca/base/mca_base_pvar.h"
#include "opal/mca/base/mca_base_var_enum.h"

/* The BTL framework (interface 3.1.0). */
#include "opal/mca/btl/btl.h"
#include "opal/mca/btl/base/base.h"

/* The MTL framework (interface 2.0.0) and what its entry points receive. */
#include "ompi/mca/mtl/mtl.h"
#include "ompi/mca/mtl/base/base.h"
#include "ompi/mca/mtl/base/mtl_base_datatype.h"
#include "ompi/request/request.h"
#include "ompi/communicator/communicator.h"
#include "ompi/message/message.h"
#include "ompi/proc/proc.h"
/* Send modes (MCA_PML_BASE_SEND_SYNCHRONOUS ...) handed to the MTL. */
#include "ompi/mca/pml/pml.h"
