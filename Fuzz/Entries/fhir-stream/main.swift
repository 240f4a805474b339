import Foundation
import FuzzDriver
import FuzzHarnesses

exit(runFuzzer(FHIRStreamHarness.self))
