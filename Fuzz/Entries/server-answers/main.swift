import Foundation
import FuzzDriver
import FuzzHarnesses

exit(runFuzzer(ServerAnswerHarness.self))
