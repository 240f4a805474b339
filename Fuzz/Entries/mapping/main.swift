import Foundation
import FuzzDriver
import FuzzHarnesses

exit(runFuzzer(MappingHarness.self))
