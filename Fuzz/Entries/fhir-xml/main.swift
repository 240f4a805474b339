import Foundation
import FuzzDriver
import FuzzHarnesses

exit(runFuzzer(FHIRXMLHarness.self))
