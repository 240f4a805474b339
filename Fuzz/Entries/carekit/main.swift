import Foundation
import FuzzDriver
import FuzzHarnesses

exit(runFuzzer(CareKitHarness.self))
