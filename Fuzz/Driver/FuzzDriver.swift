import FuzzHarnesses

/// libFuzzer's driver (compiler-rt), linked in by `-sanitize=fuzzer`: parses libFuzzer's flags
/// and calls the callback with each input. Declared here because SwiftPM gives every executable
/// its own `main`, so libFuzzer's `main` is not used.
@_silgen_name("LLVMFuzzerRunDriver")
func LLVMFuzzerRunDriver(_ argc: UnsafeMutablePointer<CInt>,
                         _ argv: UnsafeMutablePointer<UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?>,
                         _ callback: @convention(c) (UnsafePointer<UInt8>?, Int) -> CInt) -> CInt

/// The harness this executable fuzzes (set once, before libFuzzer starts).
nonisolated(unsafe) private var harness: (any FuzzHarness.Type)?

/// Runs libFuzzer over `fuzzed` with the process's arguments; returns libFuzzer's exit status.
public func runFuzzer(_ fuzzed: any FuzzHarness.Type) -> CInt {
    harness = fuzzed
    var argc = CommandLine.argc
    var argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>? = CommandLine.unsafeArgv
    return LLVMFuzzerRunDriver(&argc, &argv) { data, size in
        FuzzHarnesses.fuzz(harness!, data, size)
    }
}
