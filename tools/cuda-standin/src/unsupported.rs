//! Driver entry points this stand-in does not implement: each is exported (so a
//! `dlsym` of it succeeds, as with the real driver) and returns CUDA_ERROR_NOT_SUPPORTED
//! with a log line naming it. The names are those cuda.h (12.9) declares, after its
//! `_v2`/`_ptds`/`_ptsz` renames, minus the implemented ones.

use std::ffi::c_int;

use crate::codes::NOT_SUPPORTED;

fn not_supported(name: &'static str) -> c_int {
    crate::abi::entry(name, || {
        crate::counters::add("unsupported.calls", 1);
        crate::log!("{name} is not implemented by the stand-in (CUDA_ERROR_NOT_SUPPORTED)");
        NOT_SUPPORTED
    })
}

macro_rules! unsupported {
    ($($name:ident),* $(,)?) => {
        $(
            /// Not implemented: CUDA_ERROR_NOT_SUPPORTED and a log line. Arguments, whatever
            /// they are, are ignored (the C calling convention lets the caller pass them).
            #[unsafe(no_mangle)]
            pub extern "C" fn $name() -> c_int {
                not_supported(stringify!($name))
            }
        )*

        /// Every unimplemented name and its stub, for cuGetProcAddress.
        pub(crate) const UNSUPPORTED: &[(&str, extern "C" fn() -> c_int)] =
            &[$((stringify!($name), $name)),*];
    };
}

unsupported! {
    cuArray3DCreate, cuArray3DCreate_v2, cuArray3DGetDescriptor, cuArray3DGetDescriptor_v2,
    cuArrayCreate, cuArrayCreate_v2, cuArrayDestroy, cuArrayGetDescriptor,
    cuArrayGetDescriptor_v2, cuArrayGetMemoryRequirements, cuArrayGetPlane,
    cuArrayGetSparseProperties, cuCheckpointProcessCheckpoint,
    cuCheckpointProcessGetRestoreThreadId, cuCheckpointProcessGetState,
    cuCheckpointProcessLock, cuCheckpointProcessRestore, cuCheckpointProcessUnlock,
    cuCoredumpGetAttribute, cuCoredumpGetAttributeGlobal, cuCoredumpSetAttribute,
    cuCoredumpSetAttributeGlobal, cuCtxAttach, cuCtxCreate_v3, cuCtxCreate_v4, cuCtxDetach,
    cuCtxDisablePeerAccess, cuCtxEnablePeerAccess, cuCtxFromGreenCtx, cuCtxGetApiVersion,
    cuCtxGetCacheConfig, cuCtxGetDevResource, cuCtxGetExecAffinity, cuCtxGetFlags,
    cuCtxGetId, cuCtxGetLimit, cuCtxGetSharedMemConfig, cuCtxGetStreamPriorityRange,
    cuCtxRecordEvent, cuCtxResetPersistingL2Cache, cuCtxSetCacheConfig, cuCtxSetFlags,
    cuCtxSetLimit, cuCtxSetSharedMemConfig, cuCtxWaitEvent, cuDestroyExternalMemory,
    cuDestroyExternalSemaphore, cuDevResourceGenerateDesc, cuDevSmResourceSplitByCount,
    cuDeviceComputeCapability, cuDeviceGetByPCIBusId, cuDeviceGetDefaultMemPool,
    cuDeviceGetDevResource, cuDeviceGetExecAffinitySupport, cuDeviceGetGraphMemAttribute,
    cuDeviceGetLuid, cuDeviceGetMemPool, cuDeviceGetNvSciSyncAttributes,
    cuDeviceGetP2PAttribute, cuDeviceGetProperties, cuDeviceGetTexture1DLinearMaxWidth,
    cuDeviceGraphMemTrim, cuDevicePrimaryCtxReset, cuDevicePrimaryCtxReset_v2,
    cuDeviceRegisterAsyncNotification, cuDeviceSetGraphMemAttribute, cuDeviceSetMemPool,
    cuDeviceUnregisterAsyncNotification, cuEventElapsedTime_v2,
    cuExternalMemoryGetMappedBuffer, cuExternalMemoryGetMappedMipmappedArray,
    cuFlushGPUDirectRDMAWrites, cuFuncGetAttribute, cuFuncGetModule, cuFuncGetName,
    cuFuncGetParamInfo, cuFuncIsLoaded, cuFuncLoad, cuFuncSetAttribute, cuFuncSetBlockShape,
    cuFuncSetCacheConfig, cuFuncSetSharedMemConfig, cuFuncSetSharedSize, cuGetExportTable,
    cuGraphAddBatchMemOpNode, cuGraphAddChildGraphNode, cuGraphAddDependencies,
    cuGraphAddDependencies_v2, cuGraphAddEmptyNode, cuGraphAddEventRecordNode,
    cuGraphAddEventWaitNode, cuGraphAddExternalSemaphoresSignalNode,
    cuGraphAddExternalSemaphoresWaitNode, cuGraphAddHostNode, cuGraphAddKernelNode,
    cuGraphAddKernelNode_v2, cuGraphAddMemAllocNode, cuGraphAddMemFreeNode,
    cuGraphAddMemcpyNode, cuGraphAddMemsetNode, cuGraphAddNode, cuGraphAddNode_v2,
    cuGraphBatchMemOpNodeGetParams, cuGraphBatchMemOpNodeSetParams,
    cuGraphChildGraphNodeGetGraph, cuGraphClone, cuGraphConditionalHandleCreate,
    cuGraphCreate, cuGraphDebugDotPrint, cuGraphDestroy, cuGraphDestroyNode,
    cuGraphEventRecordNodeGetEvent, cuGraphEventRecordNodeSetEvent,
    cuGraphEventWaitNodeGetEvent, cuGraphEventWaitNodeSetEvent,
    cuGraphExecBatchMemOpNodeSetParams, cuGraphExecChildGraphNodeSetParams,
    cuGraphExecDestroy, cuGraphExecEventRecordNodeSetEvent,
    cuGraphExecEventWaitNodeSetEvent, cuGraphExecExternalSemaphoresSignalNodeSetParams,
    cuGraphExecExternalSemaphoresWaitNodeSetParams, cuGraphExecGetFlags,
    cuGraphExecHostNodeSetParams, cuGraphExecKernelNodeSetParams,
    cuGraphExecKernelNodeSetParams_v2, cuGraphExecMemcpyNodeSetParams,
    cuGraphExecMemsetNodeSetParams, cuGraphExecNodeSetParams, cuGraphExecUpdate,
    cuGraphExecUpdate_v2, cuGraphExternalSemaphoresSignalNodeGetParams,
    cuGraphExternalSemaphoresSignalNodeSetParams,
    cuGraphExternalSemaphoresWaitNodeGetParams, cuGraphExternalSemaphoresWaitNodeSetParams,
    cuGraphGetEdges, cuGraphGetEdges_v2, cuGraphGetNodes, cuGraphGetRootNodes,
    cuGraphHostNodeGetParams, cuGraphHostNodeSetParams, cuGraphInstantiate,
    cuGraphInstantiateWithFlags, cuGraphInstantiateWithParams, cuGraphInstantiate_v2,
    cuGraphKernelNodeCopyAttributes, cuGraphKernelNodeGetAttribute,
    cuGraphKernelNodeGetParams, cuGraphKernelNodeGetParams_v2,
    cuGraphKernelNodeSetAttribute, cuGraphKernelNodeSetParams,
    cuGraphKernelNodeSetParams_v2, cuGraphLaunch, cuGraphMemAllocNodeGetParams,
    cuGraphMemFreeNodeGetParams, cuGraphMemcpyNodeGetParams, cuGraphMemcpyNodeSetParams,
    cuGraphMemsetNodeGetParams, cuGraphMemsetNodeSetParams, cuGraphNodeFindInClone,
    cuGraphNodeGetDependencies, cuGraphNodeGetDependencies_v2, cuGraphNodeGetDependentNodes,
    cuGraphNodeGetDependentNodes_v2, cuGraphNodeGetEnabled, cuGraphNodeGetType,
    cuGraphNodeSetEnabled, cuGraphNodeSetParams, cuGraphReleaseUserObject,
    cuGraphRemoveDependencies, cuGraphRemoveDependencies_v2, cuGraphRetainUserObject,
    cuGraphUpload, cuGraphicsMapResources, cuGraphicsResourceGetMappedMipmappedArray,
    cuGraphicsResourceGetMappedPointer, cuGraphicsResourceGetMappedPointer_v2,
    cuGraphicsResourceSetMapFlags, cuGraphicsResourceSetMapFlags_v2,
    cuGraphicsSubResourceGetMappedArray, cuGraphicsUnmapResources,
    cuGraphicsUnregisterResource, cuGreenCtxCreate, cuGreenCtxDestroy,
    cuGreenCtxGetDevResource, cuGreenCtxRecordEvent, cuGreenCtxStreamCreate,
    cuGreenCtxWaitEvent, cuImportExternalMemory, cuImportExternalSemaphore,
    cuKernelGetAttribute, cuKernelGetFunction, cuKernelGetLibrary, cuKernelGetName,
    cuKernelGetParamInfo, cuKernelSetAttribute, cuKernelSetCacheConfig, cuLaunch,
    cuLaunchCooperativeKernel, cuLaunchCooperativeKernelMultiDevice, cuLaunchGrid,
    cuLaunchGridAsync, cuLaunchHostFunc, cuLaunchKernel, cuLaunchKernelEx,
    cuLibraryEnumerateKernels, cuLibraryGetGlobal, cuLibraryGetKernel,
    cuLibraryGetKernelCount, cuLibraryGetManaged, cuLibraryGetModule,
    cuLibraryGetUnifiedFunction, cuLibraryLoadData, cuLibraryLoadFromFile, cuLibraryUnload,
    cuLinkAddData, cuLinkAddData_v2, cuLinkAddFile, cuLinkAddFile_v2, cuLinkCreate,
    cuLinkCreate_v2, cuLogsCurrent, cuLogsDumpToFile, cuLogsDumpToMemory,
    cuLogsRegisterCallback, cuLogsUnregisterCallback, cuMemAddressFree, cuMemAddressReserve,
    cuMemAdvise, cuMemAdvise_v2, cuMemAllocAsync, cuMemAllocFromPoolAsync, cuMemAllocPitch,
    cuMemAllocPitch_v2, cuMemBatchDecompressAsync, cuMemCreate,
    cuMemExportToShareableHandle, cuMemFreeAsync, cuMemGetAccess,
    cuMemGetAllocationGranularity, cuMemGetAllocationPropertiesFromHandle,
    cuMemGetHandleForAddressRange, cuMemHostGetFlags, cuMemImportFromShareableHandle,
    cuMemMap, cuMemMapArrayAsync, cuMemPoolCreate, cuMemPoolDestroy, cuMemPoolExportPointer,
    cuMemPoolExportToShareableHandle, cuMemPoolGetAccess, cuMemPoolGetAttribute,
    cuMemPoolImportFromShareableHandle, cuMemPoolImportPointer, cuMemPoolSetAccess,
    cuMemPoolSetAttribute, cuMemPoolTrimTo, cuMemPrefetchAsync, cuMemPrefetchAsync_v2,
    cuMemRangeGetAttribute, cuMemRangeGetAttributes, cuMemRelease, cuMemSetAccess,
    cuMemUnmap, cuMemcpy2D, cuMemcpy2DAsync, cuMemcpy2DAsync_v2, cuMemcpy2DUnaligned,
    cuMemcpy2DUnaligned_v2, cuMemcpy2D_v2, cuMemcpy3D, cuMemcpy3DAsync, cuMemcpy3DAsync_v2,
    cuMemcpy3DBatchAsync, cuMemcpy3DPeer, cuMemcpy3DPeerAsync, cuMemcpy3D_v2, cuMemcpyAtoA,
    cuMemcpyAtoA_v2, cuMemcpyAtoD, cuMemcpyAtoD_v2, cuMemcpyAtoH, cuMemcpyAtoHAsync,
    cuMemcpyAtoHAsync_v2, cuMemcpyAtoH_v2, cuMemcpyBatchAsync, cuMemcpyDtoA,
    cuMemcpyDtoA_v2, cuMemcpyHtoA, cuMemcpyHtoAAsync, cuMemcpyHtoAAsync_v2, cuMemcpyHtoA_v2,
    cuMemsetD16, cuMemsetD16Async, cuMemsetD16_v2, cuMemsetD2D16, cuMemsetD2D16Async,
    cuMemsetD2D16_v2, cuMemsetD2D32, cuMemsetD2D32Async, cuMemsetD2D32_v2, cuMemsetD2D8,
    cuMemsetD2D8Async, cuMemsetD2D8_v2, cuMemsetD32, cuMemsetD32Async, cuMemsetD32_v2,
    cuMipmappedArrayCreate, cuMipmappedArrayDestroy, cuMipmappedArrayGetLevel,
    cuMipmappedArrayGetMemoryRequirements, cuMipmappedArrayGetSparseProperties,
    cuModuleEnumerateFunctions, cuModuleGetFunction, cuModuleGetFunctionCount,
    cuModuleGetGlobal, cuModuleGetGlobal_v2, cuModuleGetLoadingMode, cuModuleGetSurfRef,
    cuModuleGetTexRef, cuModuleLoad, cuModuleLoadData, cuModuleLoadDataEx,
    cuModuleLoadFatBinary, cuModuleUnload, cuMulticastAddDevice, cuMulticastBindAddr,
    cuMulticastBindMem, cuMulticastCreate, cuMulticastGetGranularity, cuMulticastUnbind,
    cuOccupancyAvailableDynamicSMemPerBlock, cuOccupancyMaxActiveBlocksPerMultiprocessor,
    cuOccupancyMaxActiveBlocksPerMultiprocessorWithFlags, cuOccupancyMaxActiveClusters,
    cuOccupancyMaxPotentialBlockSize, cuOccupancyMaxPotentialBlockSizeWithFlags,
    cuOccupancyMaxPotentialClusterSize, cuParamSetSize, cuParamSetTexRef, cuParamSetf,
    cuParamSeti, cuParamSetv, cuSignalExternalSemaphoresAsync, cuStreamAddCallback,
    cuStreamAttachMemAsync, cuStreamBatchMemOp, cuStreamBatchMemOp_ptsz,
    cuStreamBatchMemOp_v2, cuStreamBeginCapture, cuStreamBeginCaptureToGraph,
    cuStreamBeginCapture_ptsz, cuStreamBeginCapture_v2, cuStreamCopyAttributes,
    cuStreamEndCapture, cuStreamGetAttribute, cuStreamGetCaptureInfo,
    cuStreamGetCaptureInfo_ptsz, cuStreamGetCaptureInfo_v2, cuStreamGetCaptureInfo_v3,
    cuStreamGetCtx, cuStreamGetCtx_v2, cuStreamGetDevice, cuStreamGetFlags,
    cuStreamGetGreenCtx, cuStreamGetId, cuStreamGetPriority, cuStreamIsCapturing,
    cuStreamSetAttribute, cuStreamUpdateCaptureDependencies,
    cuStreamUpdateCaptureDependencies_v2, cuStreamWaitValue32, cuStreamWaitValue32_ptsz,
    cuStreamWaitValue32_v2, cuStreamWaitValue64, cuStreamWaitValue64_ptsz,
    cuStreamWaitValue64_v2, cuStreamWriteValue32, cuStreamWriteValue32_ptsz,
    cuStreamWriteValue32_v2, cuStreamWriteValue64, cuStreamWriteValue64_ptsz,
    cuStreamWriteValue64_v2, cuSurfObjectCreate, cuSurfObjectDestroy,
    cuSurfObjectGetResourceDesc, cuSurfRefGetArray, cuSurfRefSetArray,
    cuTensorMapEncodeIm2col, cuTensorMapEncodeIm2colWide, cuTensorMapEncodeTiled,
    cuTensorMapReplaceAddress, cuTexObjectCreate, cuTexObjectDestroy,
    cuTexObjectGetResourceDesc, cuTexObjectGetResourceViewDesc, cuTexObjectGetTextureDesc,
    cuTexRefCreate, cuTexRefDestroy, cuTexRefGetAddress, cuTexRefGetAddressMode,
    cuTexRefGetAddress_v2, cuTexRefGetArray, cuTexRefGetBorderColor, cuTexRefGetFilterMode,
    cuTexRefGetFlags, cuTexRefGetFormat, cuTexRefGetMaxAnisotropy,
    cuTexRefGetMipmapFilterMode, cuTexRefGetMipmapLevelBias, cuTexRefGetMipmapLevelClamp,
    cuTexRefGetMipmappedArray, cuTexRefSetAddress, cuTexRefSetAddress2D,
    cuTexRefSetAddress2D_v2, cuTexRefSetAddress2D_v3, cuTexRefSetAddressMode,
    cuTexRefSetAddress_v2, cuTexRefSetArray, cuTexRefSetBorderColor, cuTexRefSetFilterMode,
    cuTexRefSetFlags, cuTexRefSetFormat, cuTexRefSetMaxAnisotropy,
    cuTexRefSetMipmapFilterMode, cuTexRefSetMipmapLevelBias, cuTexRefSetMipmapLevelClamp,
    cuTexRefSetMipmappedArray, cuThreadExchangeStreamCaptureMode, cuUserObjectCreate,
    cuUserObjectRelease, cuUserObjectRetain, cuWaitExternalSemaphoresAsync,
}
