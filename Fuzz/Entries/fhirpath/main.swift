import Foundation
import FuzzDriver
import FuzzHarnesses

exit(runFuzzer(FHIRPathHarness.self))
