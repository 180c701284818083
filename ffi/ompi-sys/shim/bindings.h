/* What bindgen reads: the shim's declarations, then cm's request headers (bindings
 * only: shim.c never includes them). A file of the source tree, not one the build
 * script writes: bindgen names every header it reads for cargo to watch, and a
 * header written during the build is always newer than the build, so cargo would
 * rebuild ompi-sys and everything above it at every invocation. */
#include "shim.h"
#include "ompi/mca/pml/cm/pml_cm_sendreq.h"
