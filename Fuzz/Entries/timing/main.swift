import Foundation
import FuzzDriver
import FuzzHarnesses

exit(runFuzzer(TimingHarness.self))
