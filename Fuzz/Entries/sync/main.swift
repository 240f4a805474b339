import Foundation
import FuzzDriver
import FuzzHarnesses

exit(runFuzzer(SyncHarness.self))
