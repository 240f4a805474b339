import Foundation
import FuzzDriver
import FuzzHarnesses

exit(runFuzzer(QuestionnaireHarness.self))
