import FHIR
import Foundation
import Testing

@Suite("FolderFiles")
struct FolderFilesTests {
    @Test("folders and links to them give their files by suffix (any case), nested, sorted; a folder named like a file is not a file; an empty folder stays itself")
    func expand() throws {
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("folder-files-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: root) }
        let fm = FileManager.default
        try fm.createDirectory(at: root.appendingPathComponent("data/nested/odd.json"), withIntermediateDirectories: true)
        try fm.createDirectory(at: root.appendingPathComponent("empty"), withIntermediateDirectories: true)
        for name in ["data/b.json", "data/A.XML", "data/notes.txt", "data/nested/c.ndjson"] {
            try Data("{}".utf8).write(to: root.appendingPathComponent(name))
        }
        try fm.createSymbolicLink(at: root.appendingPathComponent("link"), withDestinationURL: root.appendingPathComponent("data"))
        let suffixes = [".json", ".xml", ".ndjson"]
        let data = root.appendingPathComponent("data").path
        #expect(FolderFiles.expand([data], suffixes: suffixes) == ["A.XML", "b.json", "nested/c.ndjson"].map { data + "/" + $0 })
        let link = root.appendingPathComponent("link").path
        #expect(FolderFiles.expand([link], suffixes: suffixes) == ["A.XML", "b.json", "nested/c.ndjson"].map { link + "/" + $0 })
        let empty = root.appendingPathComponent("empty").path
        #expect(FolderFiles.expand([empty, "missing.json"], suffixes: suffixes) == [empty, "missing.json"])
    }

    @Test("a file's size without reading it: bytes on disk, through links; nil for a missing file")
    func size() throws {
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("file-size-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: root) }
        try FileManager.default.createDirectory(at: root, withIntermediateDirectories: true)
        let file = root.appendingPathComponent("a.json")
        try Data(repeating: 0x20, count: 70_001).write(to: file)
        try FileManager.default.createSymbolicLink(at: root.appendingPathComponent("link.json"), withDestinationURL: file)
        try Data().write(to: root.appendingPathComponent("empty.json"))
        #expect(FileBytes.size(file.path) == 70_001)
        #expect(FileBytes.size(root.appendingPathComponent("link.json").path) == 70_001)
        #expect(FileBytes.size(root.appendingPathComponent("empty.json").path) == 0)
        #expect(FileBytes.size(root.appendingPathComponent("missing.json").path) == nil)
    }
}
