import FHIRClient
import Foundation
import Gateway

/// A Bulk Data export's manifest, as a server (or whoever answers for it) sends it: refused with
/// an error that names the status URL and carries no control characters, or read into files whose
/// counts are not negative and whose download paths stay in the export's directory.
public enum BulkManifestHarness: FuzzHarness {
    public static let name = "bulk-manifest"
    static let statusURL = "https://ehr.example.org/fhir/$export-poll-status?_jobId=1"
    static let directory = "/var/lib/caregate/store.sqlite.bulk/0123abcd"

    public static func run(_ input: [UInt8]) throws(PropertyFailure) {
        let manifest: BulkManifest
        do {
            manifest = try BulkManifest.read(input, url: statusURL)
        } catch {
            let message = error.description
            guard message.contains(statusURL), !message.unicodeScalars.contains(where: { $0.value < 0x20 || $0.value == 0x7F }) else {
                throw PropertyFailure("a refused manifest's error: \(message.debugDescription)")
            }
            return
        }
        guard manifest.bytes == input else { throw PropertyFailure("the manifest kept other bytes than it was read from") }
        for (i, file) in manifest.output.enumerated() {
            if let count = file.count, count < 0 { throw PropertyFailure("a file count of \(count) was taken") }
            let path = BulkExportFetch.downloadPath(of: file, at: i, in: directory)
            let name = String(path.dropFirst(directory.count + 1))
            guard path.hasPrefix(directory + "/"), !name.contains("/"), !name.hasPrefix("."), !name.contains("\0"), name.hasSuffix(".ndjson") else {
                throw PropertyFailure("the file of type \(file.type.debugDescription) is downloaded to \(path.debugDescription)")
            }
        }
    }
}
