import Foundation
import FuzzDriver
import FuzzHarnesses

exit(runFuzzer(FHIRJSONHarness.self))
