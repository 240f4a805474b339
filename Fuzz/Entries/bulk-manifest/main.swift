import Foundation
import FuzzDriver
import FuzzHarnesses

exit(runFuzzer(BulkManifestHarness.self))
