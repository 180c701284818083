/*
 * Umbrella header for ffi/fabric-sys: the libfabric API our components use.
 * rusnic: FI_EP_DGRAM endpoints, CQs, AVs (fi_endpoint.h, fi_cm.h for fi_getname).
 * rofi:   FI_EP_RDM tagged messaging, scalable endpoints (fi_tagged.h); host
 *         matching's untagged messages and RMA reads (fi_rma.h).
 * fi_errno.h for fi_strerror and the FI_E* codes mapped to MPI errors.
 */
#include <rdma/fabric.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_tagged.h>
#include <rdma/fi_rma.h>
#include <rdma/fi_errno.h>
