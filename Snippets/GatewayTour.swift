// Import the demo patient's Bundle into a store, then issue an enrollment code for a device.
import CareStore
import Foundation
import Gateway
import Mapping

let store = try SQLiteCarePlanStore(path: "caregate.sqlite")
let importer = FHIRImporter(mappings: try MappingSet.load(["Mappings"]), store: store,
                            timeZone: TimeZone(identifier: "America/New_York")!)
let report = importer.run(["FHIRSamples/bundle/maria-lopez-demo-bundle.json"])
print(report.patients.count, report.failedPatients.isEmpty)

let code = try DeviceEnrollment(store: store).issueCode(patientID: "Patient/maria-lopez").code
// snippet.hide
print("code: \(code.count) characters")
