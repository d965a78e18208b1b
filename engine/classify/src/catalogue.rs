//! Detector ids per tier and the built-in regex patterns, each with an example line that must
//! fire it and one that must not.
//!
//! AORTA 0.2.1's library "1" has seven Tier-4 patterns and five AMD dmesg patterns. aorta's
//! library "2" added the NVIDIA side (Xid, ECC/row remap, CUDA/cuBLAS/cuDNN/NCCL errors, OOM,
//! illegal access, device-side asserts). Library "3" matches the shapes real jobs print: a NaN
//! or Inf loss in any trainer's format, tracebacks behind launcher and logger prefixes, every
//! spelling of GPU out-of-memory, HIP enum names without AORTA's underscore. Library "4" reads
//! the kernel's own words (issue 36), taken from the sources: PCIe AER's fatal lines in both
//! severity spellings (`drivers/pci/pcie/aer.c`), amdgpu ring timeouts on any ring, its GPU
//! reset and gfxhub/mmhub page-fault lines with or without the `amdgpu: ` sub-prefix
//! (`drivers/gpu/drm/amd/amdgpu/`), and NVIDIA's ECC-class Xids (48, 63, 64, 92, 94, 95 in the
//! Xid catalogue) as ECC events; an NVSwitch `SXid` is not a GPU Xid. Fixtures, one per source
//! and version: `tests/fixtures/kernel/`. The AORTA ids keep their exact spelling, so recipes
//! that disable them keep working.
//!
//! Tier-4 patterns are *line-local* (no match contains a newline) and each lists
//! [`Trigger`]s, literals every match contains: the scanner looks for triggers first and runs
//! a pattern's regex only on lines holding one of its triggers (see `scan.rs`).

use std::fmt;

/// Bumped whenever a pattern is added or a regex changes (it names what a verdict was judged by).
pub const PATTERN_LIBRARY_VERSION: &str = "4";
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Tier {
    Tier1,
    Tier2,
    Tier3,
    Tier4,
    Tier5,
}

impl Tier {
    pub const ALL: [Tier; 5] = [
        Tier::Tier1,
        Tier::Tier2,
        Tier::Tier3,
        Tier::Tier4,
        Tier::Tier5,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Tier::Tier1 => "tier1",
            Tier::Tier2 => "tier2",
            Tier::Tier3 => "tier3",
            Tier::Tier4 => "tier4",
            Tier::Tier5 => "tier5",
        }
    }

    /// What each tier looks at, for help texts.
    pub fn summary(self) -> &'static str {
        match self {
            Tier::Tier1 => "process exit: non-zero exit, signals, timeout, core dump, exec failure",
            Tier::Tier2 => {
                "hang monitor: output silence, idle I/O and idle GPU over the whole process tree"
            }
            Tier::Tier3 => {
                "kernel and GPU: dmesg (amdgpu, NVRM Xid, ECC, AER), VRAM growth, throttling"
            }
            Tier::Tier4 => "built-in log patterns (this catalogue)",
            Tier::Tier5 => "the recipe's custom_patterns",
        }
    }

    pub fn parse(token: &str) -> Option<Tier> {
        Tier::ALL
            .into_iter()
            .find(|t| t.name().eq_ignore_ascii_case(token.trim()))
    }
}

impl fmt::Display for Tier {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PatternFlags {
    pub multiline: bool,
    pub ignore_case: bool,
}

/// A literal that every match of a Tier-4 pattern contains (case-sensitive bytes).
///
/// `word_before` / `word_after`: the literal only counts when the byte before / after it is not
/// an ASCII letter, digit or `_`, so `nan` is not looked for inside `nanoseconds` nor `INF`
/// inside `INFO`. The scanner relies on this being true of every match; tests check it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Trigger {
    pub literal: &'static str,
    pub word_before: bool,
    pub word_after: bool,
}

impl Trigger {
    /// Whether the occurrence `haystack[start..end]` of the literal counts.
    pub fn holds_at(&self, haystack: &[u8], start: usize, end: usize) -> bool {
        let word = |b: u8| b.is_ascii_alphanumeric() || b == b'_';
        let before_ok = !self.word_before || start == 0 || !word(haystack[start - 1]);
        let after_ok = !self.word_after || end >= haystack.len() || !word(haystack[end]);
        before_ok && after_ok
    }
}

/// A built-in regex detector. `regex` is Python `re` syntax (fancy-regex compiles it).
#[derive(Debug, Clone, Copy)]
pub struct Pattern {
    pub id: &'static str,
    pub description: &'static str,
    pub regex: &'static str,
    pub flags: PatternFlags,
    /// A log line the pattern must match.
    pub sample: &'static str,
    /// A look-alike log line from a healthy run that the pattern must not match.
    pub negative: &'static str,
    /// The scan's prefilter (Tier 4 only; Tier-3 kernel logs are scanned whole).
    pub triggers: &'static [Trigger],
}

impl Pattern {
    /// The regex with its flags folded in as an inline group, ready for fancy-regex.
    pub fn compile(&self) -> Result<fancy_regex::Regex, Box<fancy_regex::Error>> {
        let mut prefix = String::new();
        if self.flags.multiline || self.flags.ignore_case {
            prefix.push_str("(?");
            if self.flags.multiline {
                prefix.push('m');
            }
            if self.flags.ignore_case {
                prefix.push('i');
            }
            prefix.push(')');
        }
        // `seek`: a look-around pattern first skips to where its look-around-free
        // approximation can match, instead of starting the backtracking VM at every position.
        fancy_regex::RegexBuilder::new(&format!("{prefix}{}", self.regex))
            .seek(true)
            .build()
            .map_err(Box::new)
    }
}

const NONE: PatternFlags = PatternFlags {
    multiline: false,
    ignore_case: false,
};
const M: PatternFlags = PatternFlags {
    multiline: true,
    ignore_case: false,
};
const MI: PatternFlags = PatternFlags {
    multiline: true,
    ignore_case: true,
};

const fn lit(literal: &'static str) -> Trigger {
    Trigger {
        literal,
        word_before: false,
        word_after: false,
    }
}

const fn word(literal: &'static str) -> Trigger {
    Trigger {
        literal,
        word_before: true,
        word_after: true,
    }
}

const fn word_end(literal: &'static str) -> Trigger {
    Trigger {
        literal,
        word_before: false,
        word_after: true,
    }
}

const fn p(
    id: &'static str,
    description: &'static str,
    regex: &'static str,
    flags: PatternFlags,
    examples: [&'static str; 2],
    triggers: &'static [Trigger],
) -> Pattern {
    Pattern {
        id,
        description,
        regex,
        flags,
        sample: examples[0],
        negative: examples[1],
        triggers,
    }
}

/// Optional prefixes that launchers, loggers and progress bars put before a message, any
/// number of them in any order: `[rank0]:`, `[default3]:`, `[1,0]<stderr>:`, `0: ` (srun -l),
/// `worker-1: ` (pdsh), `trainer-1  | ` (compose), `(pid=12)`, `(VllmWorker rank=0 pid=12)` (Ray,
/// vLLM), a container runtime's `stderr F`, timestamps, levels (`ERROR`, `[ERROR]`, `ERROR:root:`), glog/c10 headers
/// (`[E102 12:00:00.123456 7 ProcessGroupNCCL.cpp:616]`), source locations (`[engine.py:160]`),
/// a tqdm bar, or anything redrawn before a carriage return.
macro_rules! line_prefix {
    () => {
        concat!(
            r"(?:[ \t]*(?:",
            r"\[(?:rank|default|Rank )?\d+(?:,\d+)?\](?:<std(?:out|err)>)?:?",
            r"|\((?:[\w.-]+ )?\w+=[\w.:-]+(?:,? \w+=[\w.:-]+)*\)",
            r"|(?:stdout|stderr) [FP]",
            r"|\[?(?:\d{4}-)?\d\d-\d\d[ T]\d\d:\d\d:\d\d(?:[.,]\d+)?(?:Z|[+-]\d\d:?\d\d)?\]?",
            r"|\[?(?:DEBUG|INFO|WARN(?:ING)?|ERROR|CRITICAL|FATAL)\]?:?",
            r"|\[?[IWEF]\d{4} \d\d:\d\d:\d\d\.\d+ +\d+ [\w./-]+:\d+\]",
            r"|\[[\w./-]+:\d+(?::\w+)?\]",
            r"|[\w.-]+(?::| +\|| +-)",
            r"|-",
            r"|[^\n|]*\d{1,3}%\|[^|\n]*\|[^\[\n]*\[[^\]\n]*\]",
            r"|[^\n]*\r",
            r"))*[ \t]*"
        )
    };
}

/// A non-finite value as Python, JSON, numpy, torch and Megatron (`{:E}` → `NAN`) print it.
macro_rules! nonfinite {
    () => {
        r"(?:nan|NaN|NAN|Nan|inf|Inf|INF|infinity|Infinity|INFINITY)"
    };
}

/// The triggers of [`nonfinite!`]: `Infinity` is found through `nfinity`, since `Inf` inside
/// it is not a word.
const NONFINITE_TRIGGERS: &[Trigger] = &[
    word("nan"),
    word("NaN"),
    word("NAN"),
    word("Nan"),
    word("inf"),
    word("Inf"),
    word("INF"),
    word_end("nfinity"),
    word_end("NFINITY"),
];

/// Tier-4 log patterns in scan order (AORTA's seven first, under their AORTA ids).
pub const TIER4_PATTERNS: &[Pattern] = &[
    p(
        "tier4:python_traceback",
        "Python traceback header, alone on its line after optional launcher/logger prefixes",
        concat!(r"^", line_prefix!(), r"Traceback \(most recent call last\):[ \t\r]*$"),
        M,
        [
            "[rank0]: ERROR 01-02 12:00:00 [engine.py:160] Traceback (most recent call last):",
            "note: Traceback (most recent call last): is printed by the handler below",
        ],
        &[lit("Traceback (most recent call last):")],
    ),
    p(
        "tier4:hip_error",
        "HIP error code (hipErrorX or AORTA's hipError_X) or `HIP error:`",
        r"hipError_[A-Za-z0-9_]+|HIP error:|\bhipError(?!NotReady\b)[A-Z][A-Za-z0-9]*",
        NONE,
        ["HIP error: hipErrorNoBinaryForGpu: Unable to find code object for all current devices!", "hipEventQuery returned hipSuccess"],
        &[lit("hipError"), lit("HIP error:")],
    ),
    p(
        "tier4:cuda_error",
        "CUDA error code (runtime cudaErrorX, driver CUDA_ERROR_X) or `CUDA error:`",
        r"cudaError(?!_t\b|NotReady\b)[A-Za-z0-9_]*|CUDA error:|CUDA driver error|\bCUDA_ERROR_(?!NOT_READY\b)[A-Z_]+",
        NONE,
        ["operator returned cudaErrorIllegalAddress at kernel.cu:120", "static cudaError_t check(cudaError_t e) { return e; } // cudaSuccess"],
        &[lit("cudaError"), lit("CUDA error:"), lit("CUDA driver error"), lit("CUDA_ERROR_")],
    ),
    p(
        "tier4:rocm_error",
        "ROCm error-code marker (`Error code: <n>`) or an HSA runtime error status",
        r"Error code: \d+|HSA_STATUS_ERROR(?:_[A-Z_]+)?",
        NONE,
        ["HSA_STATUS_ERROR_MEMORY_APERTURE_VIOLATION: The agent attempted to access memory beyond the largest legal address.", "hsa_init returned HSA_STATUS_SUCCESS; Error codes checked: none"],
        &[lit("Error code: "), lit("HSA_STATUS_ERROR")],
    ),
    p(
        "tier4:nccl_rccl_error",
        "NCCL/RCCL collective error (torch's `NCCL error`, an ncclResult_t error name)",
        r"NCCL [Ee]rror\b|RCCL ERROR|\bnccl(?:UnhandledCudaError|SystemError|InternalError|InvalidArgument|InvalidUsage|RemoteError)\b",
        NONE,
        [
            "torch.distributed.DistBackendError: NCCL error in: ProcessGroupNCCL.cpp:1970, unhandled cuda error (run with NCCL_DEBUG=INFO for details), NCCL version 2.21.5",
            "node1:812:812 [0] NCCL INFO comm 0x55d0 rank 0 nranks 8 cudaDev 0 busId 18000 - Init COMPLETE",
        ],
        &[
            lit("NCCL error"),
            lit("NCCL Error"),
            lit("RCCL ERROR"),
            lit("ncclUnhandledCudaError"),
            lit("ncclSystemError"),
            lit("ncclInternalError"),
            lit("ncclInvalidArgument"),
            lit("ncclInvalidUsage"),
            lit("ncclRemoteError"),
        ],
    ),
    p(
        "tier4:collective_timeout",
        "collective timeout: torch's NCCL watchdog, a stuck watchdog, gloo's timed-out send/recv",
        r"Watchdog caught collective operation timeout|ProcessGroupNCCL's watchdog got stuck|Some NCCL operations have failed or timed out|Timed out waiting \d+ms for (?:send|recv) operation",
        NONE,
        [
            "[rank3]:[E102 12:00:00.123456 7 ProcessGroupNCCL.cpp:616] [Rank 3] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=42, OpType=ALLREDUCE) ran for 600012 milliseconds before timing out.",
            "[rank0]: TORCH_NCCL_ASYNC_ERROR_HANDLING=1, timeout=0:10:00 (collectives that run longer are aborted)",
        ],
        &[
            lit("Watchdog caught collective operation timeout"),
            lit("watchdog got stuck"),
            lit("Some NCCL operations have failed or timed out"),
            lit("Timed out waiting "),
        ],
    ),
    p(
        "tier4:nan_signature",
        "NaN or Inf training loss: any `*loss` key (`loss`, `lm loss`, `train/loss`, `eval_loss`) \
         with `=`, `:`, `|`, `is`, dict-repr, JSON or table-cell spelling; `NaN loss detected`",
        concat!(
            // key <sep> value: `loss=nan`, `lm loss: NAN`, `'loss': nan`, `"train/loss": NaN`,
            // `│ val_loss │ nan │`, `loss is NaN`, `loss: tensor(nan, device='cuda:0')`
            r#"(?<![\w./-])(?!(?i:best|lowest|min|prev)[_/.-])[\w./-]*?(?i:loss)['"]?"#,
            r#"(?:(?:[ \t]*[:=|│┃][ \t]*)+|[ \t]+(?:(?i:is|was|became)[ \t]+)?)"#,
            r#"['"]?(?:tensor\(|np\.float(?:16|32|64)\()?[-+]?"#,
            nonfinite!(),
            r"(?![\w-])",
            // `Detected NaN loss`, `NaN loss encountered at step 12`
            r"|(?i:detected|encountered|found|got)[ \t]+(?:an?[ \t]+)?[-+]?\b",
            nonfinite!(),
            r"[ \t]+(?i:loss)\b",
            r"|\b",
            nonfinite!(),
            r"[ \t]+(?i:loss)[ \t]+(?i:detected|encountered|at step|at iteration)",
            // Lightning: "The loss returned in `training_step` is nan."
            r"|(?i:loss) returned in [^\n]{0,80}? is (?:tensor\()?[-+]?",
            nonfinite!(),
            r"(?![\w-])",
        ),
        NONE,
        [
            "{'loss': nan, 'grad_norm': nan, 'learning_rate': 4.9e-05, 'epoch': 0.02}",
            "{'loss': 2.0123, 'grad_norm': nan, 'learning_rate': 4.9e-05, 'epoch': 0.02}",
        ],
        NONFINITE_TRIGGERS,
    ),
    p(
        "tier4:cuda_oom",
        "GPU out of memory in any CUDA/HIP/NCCL/cuBLAS/XLA/vLLM spelling",
        concat!(
            r"(?:CUDA|HIP) out of memory|torch\.(?:cuda\.)?OutOfMemoryError|(?:CUDA|HIP) error: out of memory",
            r"|cudaErrorMemoryAllocation|hipErrorOutOfMemory|hipErrorMemoryAllocation|CUDA_ERROR_OUT_OF_MEMORY",
            r"|(?:Cuda|HIP) failure (?:\d+ )?'out of memory'|Failed to CUDA calloc|CUBLAS_STATUS_ALLOC_FAILED",
            r"|RESOURCE_EXHAUSTED: Out of memory|No available memory for the cache blocks",
        ),
        NONE,
        [
            "node1:812:901 [0] NCCL WARN Cuda failure 'out of memory'",
            "set PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid running out of memory",
        ],
        &[
            lit("out of memory"),
            lit("Out of memory"),
            lit("OutOfMemory"),
            lit("MemoryAllocation"),
            lit("OUT_OF_MEMORY"),
            lit("CUDA calloc"),
            lit("ALLOC_FAILED"),
            lit("No available memory for the cache blocks"),
        ],
    ),
    p(
        "tier4:cublas_status",
        "cuBLAS / cuBLASLt / hipBLAS / rocBLAS status error",
        r"(?:CU|HIP)BLAS_STATUS_(?!SUCCESS\b)[A-Z_]+|rocblas_status_(?!success\b)[a-z_]+",
        NONE,
        [
            "RuntimeError: CUDA error: CUBLAS_STATUS_EXECUTION_FAILED when calling `cublasGemmEx( handle, opa, opb, m, n, k, &falpha, a, CUDA_R_16BF, lda, b, CUDA_R_16BF, ldb, &fbeta, c, CUDA_R_16BF, ldc, CUDA_R_32F, CUBLAS_GEMM_DEFAULT_TENSOR_OP)`",
            "[rank0] cublasLt status: CUBLAS_STATUS_SUCCESS",
        ],
        &[lit("CUBLAS_STATUS_"), lit("HIPBLAS_STATUS_"), lit("rocblas_status_")],
    ),
    p(
        "tier4:cudnn_error",
        "cuDNN or MIOpen status error",
        r"CUDNN_STATUS_(?!SUCCESS\b)[A-Z_]+|cuDNN error|miopenStatus(?!Success\b)[A-Za-z]+|MIOpen Error|MIOpen\(HIP\): Error",
        NONE,
        ["RuntimeError: cuDNN error: CUDNN_STATUS_INTERNAL_ERROR", "MIOpen(HIP): Warning [IsEnoughWorkspace] Solver <GemmFwdRest>, workspace required: 4194304"],
        &[lit("CUDNN_STATUS_"), lit("cuDNN error"), lit("miopenStatus"), lit("MIOpen Error"), lit("MIOpen(HIP): Error")],
    ),
    p(
        "tier4:nccl_warn",
        "NCCL warning line (NCCL_DEBUG=WARN or INFO)",
        r"NCCL WARN",
        NONE,
        [
            "node1:812:901 [0] NCCL WARN Cuda failure 'an illegal memory access was encountered'",
            "node1:812:812 [0] NCCL INFO NET/Plugin: Could not find: libnccl-net.so. Using internal network plugin.",
        ],
        &[lit("NCCL WARN")],
    ),
    p(
        "tier4:illegal_memory_access",
        "GPU illegal memory access (CUDA's message or enum, ROCm's memory access fault)",
        r"illegal memory access|Memory access fault by GPU|IllegalAddress|CUDA_ERROR_ILLEGAL_ADDRESS",
        NONE,
        [
            "Memory access fault by GPU node-2 (Agent handle: 0x55a1c2d0) on address 0x7f1c00000000. Reason: Page not present or supervisor privilege.",
            "CUDA kernel errors might be asynchronously reported at some other API call, so the stacktrace below might be incorrect.",
        ],
        &[lit("illegal memory access"), lit("Memory access fault by GPU"), lit("IllegalAddress"), lit("ILLEGAL_ADDRESS")],
    ),
    p(
        "tier4:device_side_assert",
        "GPU device-side assertion (torch's message or the kernel's own `Assertion` line)",
        r"[Dd]evice-side assert(?:ion)? triggered|[Dd]evice-side assertion `|block: \[\d+,\d+,\d+\], thread: \[\d+,\d+,\d+\] Assertion `",
        NONE,
        [
            "/pytorch/aten/src/ATen/native/cuda/Indexing.cu:1236: indexSelectSmallIndex: block: [0,0,0], thread: [3,0,0] Assertion `srcIndex < srcSelectDimSize` failed.",
            "Compile with `TORCH_USE_CUDA_DSA` to enable device-side assertions.",
        ],
        &[lit("evice-side assert"), lit("] Assertion `")],
    ),
];

/// Tier-3 kernel-log (dmesg) patterns: AORTA's AMD five, then NVIDIA's driver (NVRM) events,
/// then amdgpu's ring timeouts and page faults (library 4).
pub const TIER3_LOG_PATTERNS: &[Pattern] = &[
    p(
        "tier3:amdgpu_reset",
        "amdgpu GPU reset (`GPU reset begin!`, `GPU reset(N) succeeded!` / `failed`, `GPU reset end with ret`), with or without the `amdgpu: ` sub-prefix",
        r"amdgpu: GPU reset|\bGPU reset(?: begin!|\(\d+\) (?:succeeded|failed)| end with ret)",
        MI,
        ["amdgpu 0000:c1:00.0: GPU reset(2) succeeded!", "amdgpu: GPU recovery disabled."],
        &[],
    ),
    p(
        "tier3:sdma_timeout",
        "SDMA semaphore timeout or hang, or a job timeout on an SDMA ring (`ring sdma0 timeout`)",
        r"SDMA semaphore timeout|SDMA hang|\bring sdma\d* timeout\b",
        MI,
        [
            "amdgpu: SDMA hang detected",
            "amdgpu: SDMA engine 0 initialized",
        ],
        &[],
    ),
    p(
        "tier3:vm_l2_fault",
        "GPU VM L2 protection fault",
        r"VM_L2_PROTECTION_FAULT",
        M,
        [
            "amdgpu: VM_L2_PROTECTION_FAULT_STATUS:0x00301031",
            "amdgpu: VM size 262144 GB, 4 levels, block size 9-bit",
        ],
        &[],
    ),
    p(
        "tier3:xgmi_link_error",
        "XGMI link error",
        r"XGMI.*(?:error|fail|link down)",
        MI,
        [
            "amdgpu: XGMI link down on hive 0",
            "amdgpu: XGMI initialized",
        ],
        &[],
    ),
    p(
        "tier3:pcie_aer_fatal",
        "PCIe AER fatal error: `AER: [Multiple ]Uncorrected|Uncorrectable (Fatal) error received`, `PCIe Bus Error: severity=Uncorrected|Uncorrectable (Fatal)` (aer.c before and after the spec-terms rename)",
        r"AER:?\s+Fatal|AER: (?:Multiple )?Uncorrect(?:ed|able) \(Fatal\) error received|severity=Uncorrect(?:ed|able) \(Fatal\)",
        M,
        [
            "pcieport 0000:00:01.0: AER: Multiple Uncorrectable (Fatal) error received: 0000:01:00.0",
            "pcieport 0000:00:01.0: AER: Uncorrectable (Non-Fatal) error received: 0000:01:00.0",
        ],
        &[],
    ),
    p(
        "tier3:nvidia_xid",
        "NVIDIA driver Xid error (number captured as `xid`)",
        r"NVRM: Xid \((?P<pci>[^)]*)\): (?P<xid>\d+)",
        M,
        [
            "NVRM: Xid (PCI:0000:18:00): 79, pid=4121, GPU has fallen off the bus.",
            "NVRM: loading NVIDIA UNIX x86_64 Kernel Module  550.54.15",
        ],
        &[],
    ),
    p(
        "tier3:nvidia_ecc",
        "NVIDIA ECC or row-remap event, or an ECC-class Xid of NVIDIA's catalogue (48 DBE, 63/64 page retirement or row remap event/failure, 92 high SBE rate, 94/95 contained/uncontained ECC)",
        r"uncorrectable (?:double bit )?ECC|double bit ECC|row remap(?:ping)? (?:failure|pending|event)|NVRM: Xid \([^)\n]*\): (?:48|63|64|92|94|95)\b",
        MI,
        [
            "NVRM: Xid (PCI:0000:3b:00): 94, pid=2781, name=python, Ch 00000008",
            "nvidia-nvswitch0: SXid (PCI:0000:05:00.0): 12028, Non-fatal, Link 32 egress non-posted PRIV error",
        ],
        &[],
    ),
    p(
        "tier3:amdgpu_ring_timeout",
        "amdgpu job timeout on any ring (`ring gfx_0.0.0 timeout`, `ring sdma0 timeout`, `ring comp_1.0.0 timeout, but soft recovered`)",
        r"\bring [\w.-]+ timeout\b",
        M,
        [
            "[drm:amdgpu_job_timedout [amdgpu]] *ERROR* ring gfx timeout, signaled seq=52231, emitted seq=52233",
            "amdgpu 0000:03:00.0: amdgpu: ring gfx_0.0.0 uses VM inv eng 0 on hub 0",
        ],
        &[],
    ),
    p(
        "tier3:amdgpu_page_fault",
        "amdgpu GPU page fault reported by a gfxhub or mmhub (`[gfxhub0] retry page fault`, `[mmhub] no-retry page fault`)",
        r"\[(?:gfx|mm)hub\d*\] [\w -]*?page fault",
        M,
        [
            "amdgpu 0000:c1:00.0: amdgpu: [gfxhub0] no-retry page fault (src_id:0 ring:24 vmid:8 pasid:32770)",
            "amdgpu 0000:c1:00.0: amdgpu: [gfxhub0] page table base 0x0 (cleared)",
        ],
        &[],
    ),
];

/// Every built-in detector id of a tier (Tier 5 ids are the recipe's `custom:<id>`).
pub fn detector_ids(tier: Tier) -> Vec<&'static str> {
    match tier {
        Tier::Tier1 => vec![
            "tier1:exit_nonzero",
            "tier1:sigsegv",
            "tier1:sigabrt",
            "tier1:sigbus",
            "tier1:timeout",
            "tier1:coredump",
            "tier1:exec_failed",
        ],
        Tier::Tier2 => vec!["tier2:hang"],
        Tier::Tier3 => {
            let mut ids: Vec<&str> = TIER3_LOG_PATTERNS.iter().map(|p| p.id).collect();
            ids.extend(["tier3:vram_growth", "tier3:thermal_throttle"]);
            ids
        }
        Tier::Tier4 => TIER4_PATTERNS.iter().map(|p| p.id).collect(),
        Tier::Tier5 => Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_pattern_compiles_matches_its_sample_and_not_its_negative() {
        for pat in TIER4_PATTERNS.iter().chain(TIER3_LOG_PATTERNS) {
            let re = pat.compile().unwrap_or_else(|e| panic!("{}: {e}", pat.id));
            assert!(
                re.is_match(pat.sample).unwrap(),
                "{} does not match its sample",
                pat.id
            );
            assert!(
                !re.is_match(pat.negative).unwrap(),
                "{} matches its negative example",
                pat.id
            );
        }
    }

    #[test]
    fn aorta_tier4_ids_come_first_in_aorta_order_and_aorta_samples_still_fire() {
        let aorta = [
            (
                "tier4:python_traceback",
                "Traceback (most recent call last):",
            ),
            ("tier4:hip_error", "hipError_OutOfMemory"),
            ("tier4:cuda_error", "cudaErrorIllegalAddress"),
            ("tier4:rocm_error", "Error code: 1"),
            (
                "tier4:nccl_rccl_error",
                "NCCL error: unhandled system error",
            ),
            (
                "tier4:collective_timeout",
                "Watchdog caught collective operation timeout: WorkNCCL ...",
            ),
            ("tier4:nan_signature", "loss is NaN"),
        ];
        for (pat, (id, sample)) in TIER4_PATTERNS.iter().zip(aorta) {
            assert_eq!(pat.id, id);
            assert!(
                pat.compile().unwrap().is_match(sample).unwrap(),
                "{id} no longer matches AORTA's sample {sample:?}"
            );
        }
    }

    #[test]
    fn success_statuses_and_look_alikes_do_not_fire() {
        let find = |id: &str| {
            TIER4_PATTERNS
                .iter()
                .find(|p| p.id == id)
                .unwrap()
                .compile()
                .unwrap()
        };
        let quiet = [
            ("tier4:cublas_status", "CUBLAS_STATUS_SUCCESS HIPBLAS_STATUS_SUCCESS rocblas_status_success"),
            ("tier4:cudnn_error", "CUDNN_STATUS_SUCCESS miopenStatusSuccess"),
            ("tier4:cuda_error", "cudaEventQuery: cudaErrorNotReady; CUDA_ERROR_NOT_READY"),
            ("tier4:hip_error", "hipErrorNotReady"),
            ("tier4:nan_signature", "best_val_loss: inf"),
            ("tier4:nan_signature", "lm loss: 7.123E+00 | loss scale: 65536.0 | grad norm: nan | number of nan iterations: 0 |"),
            ("tier4:nan_signature", "Epoch 1: val_loss improved from inf to 0.41323, saving model"),
            ("tier4:nan_signature", "loss_scale: inf, fail_on_nan_loss=True, loss=nanoseconds"),
            ("tier4:python_traceback", "print('Traceback (most recent call last):') # sic"),
        ];
        for (id, line) in quiet {
            assert!(!find(id).is_match(line).unwrap(), "{id} fires on {line:?}");
        }
        let xgmi = TIER3_LOG_PATTERNS
            .iter()
            .find(|p| p.id == "tier3:xgmi_link_error")
            .unwrap();
        assert!(!xgmi
            .compile()
            .unwrap()
            .is_match("amdgpu: XGMI initialized")
            .unwrap());
    }

    /// The scanner runs regexes line by line, so no built-in may match across a newline:
    /// no `\s`/`\W`/`\D`, no dot-all, and every negated class excludes `\n`.
    #[test]
    fn tier4_patterns_are_line_local() {
        for pat in TIER4_PATTERNS {
            let r = pat.regex;
            for bad in [r"\s", r"\W", r"\D", "(?s", "(?is", "(?ms"] {
                assert!(!r.contains(bad), "{}: {bad}", pat.id);
            }
            for (i, _) in r.match_indices("[^") {
                // The class ends at the first `]` that is not escaped.
                let mut end = i + 2;
                let b = r.as_bytes();
                while b[end] != b']' {
                    end += if b[end] == b'\\' { 2 } else { 1 };
                }
                let class = &r[i..=end];
                assert!(
                    class.contains(r"\n"),
                    "{}: {class} can match a newline",
                    pat.id
                );
            }
        }
    }

    #[test]
    fn tier4_triggers_are_in_every_sample_and_none_is_a_prefix_of_another() {
        let all: Vec<&Trigger> = TIER4_PATTERNS.iter().flat_map(|p| p.triggers).collect();
        for pat in TIER4_PATTERNS {
            assert!(!pat.triggers.is_empty(), "{} has no trigger", pat.id);
            let s = pat.sample.as_bytes();
            let found = pat.triggers.iter().any(|t| {
                s.windows(t.literal.len())
                    .enumerate()
                    .any(|(i, w)| w == t.literal.as_bytes() && t.holds_at(s, i, i + w.len()))
            });
            assert!(found, "{}: no trigger in its sample", pat.id);
        }
        // Two triggers can start at one position only if one is a prefix of the other; the
        // scan's leftmost-first search would then hide one of them.
        for a in &all {
            for b in &all {
                assert!(
                    std::ptr::eq(*a, *b) || !b.literal.starts_with(a.literal),
                    "{:?} is a prefix of {:?}",
                    a.literal,
                    b.literal
                );
            }
        }
    }

    #[test]
    fn word_triggers_skip_words_that_merely_contain_them() {
        let nan = word("nan");
        let at = |s: &str| {
            s.find("nan")
                .map(|i| nan.holds_at(s.as_bytes(), i, i + 3))
                .unwrap()
        };
        assert!(at("loss=nan"));
        assert!(at("nan"));
        assert!(at("(nan,"));
        assert!(!at("nanoseconds"));
        assert!(!at("fail_on_nan_loss"));
        assert!(!at("banana"));
        let inf = word_end("nfinity");
        assert!(inf.holds_at(b"-Infinity}", 2, 9));
        assert!(!inf.holds_at(b"Infinityx", 1, 8));
    }

    #[test]
    fn ids_are_unique_and_prefixed_by_their_tier() {
        let mut seen = std::collections::HashSet::new();
        for tier in Tier::ALL {
            for id in detector_ids(tier) {
                assert!(id.starts_with(&format!("{}:", tier.name())), "{id}");
                assert!(seen.insert(id), "duplicate {id}");
            }
        }
    }
}
