import Foundation
import FuzzDriver
import FuzzHarnesses

exit(runFuzzer(ServerConfigHarness.self))
