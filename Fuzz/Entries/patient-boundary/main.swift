import Foundation
import FuzzDriver
import FuzzHarnesses

exit(runFuzzer(PatientBoundaryHarness.self))
