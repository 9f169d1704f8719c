// `tokensignin dev keygen`: a key set written without following a link, overwriting a key, or leaving the private key
// readable by others.
@testable import Commands
import Foundation
import TestSupport
import Testing

@Suite struct KeygenTests {
    private func scratch() throws -> String {
        let dir = NSTemporaryDirectory() + "keygen-\(randomHex(6))"
        try FileManager.default.createDirectory(atPath: dir, withIntermediateDirectories: false, attributes: [.posixPermissions: 0o700])
        return dir
    }

    private func mode(_ path: String) throws -> Int {
        ((try FileManager.default.attributesOfItem(atPath: path))[.posixPermissions] as? NSNumber)?.intValue ?? -1
    }

    @Test func aNewFolderIsTheOwnersAloneAndThePrivateKeyToo() throws {
        let dir = try scratch() + "/keys"
        let run = runCommand(["dev", "keygen", "--out", dir])
        #expect(run.status == 0, "\(run.err)")
        #expect(try mode(dir) == 0o700)
        #expect(try mode(dir + "/dev-signing-key.pem") == 0o600)
        #expect(try mode(dir + "/dev-jwks.json") == 0o644 && mode(dir + "/kid") == 0o644)
        #expect(run.out == [try String(contentsOfFile: dir + "/kid", encoding: .utf8).trimmingCharacters(in: .whitespacesAndNewlines)])
    }

    /// A link planted where any of the three files goes is never written through: the command refuses, the link's
    /// target keeps its bytes, and no key is left half written.
    @Test(arguments: KeyFiles.names)
    func aLinkWhereAFileGoesIsNeitherFollowedNorOverwritten(name: String) throws {
        let dir = try scratch()
        let victim = dir + "/victim"
        try "precious\n".write(toFile: victim, atomically: false, encoding: .utf8)
        try FileManager.default.createDirectory(atPath: dir + "/keys", withIntermediateDirectories: false, attributes: [.posixPermissions: 0o700])
        try FileManager.default.createSymbolicLink(atPath: dir + "/keys/" + name, withDestinationPath: victim)
        for force in [false, true] {
            let run = runCommand(["dev", "keygen", "--out", dir + "/keys"] + (force ? ["--force"] : []))
            #expect(try String(contentsOfFile: victim, encoding: .utf8) == "precious\n", "the link's target was written")
            if force {
                // Replaced: the link itself is gone, a file of the key set stands in its place.
                #expect(run.status == 0, "\(run.err)")
                #expect((try FileManager.default.attributesOfItem(atPath: dir + "/keys/" + name))[.type] as? FileAttributeType == .typeRegular)
            } else {
                #expect(run.status == 1 && run.err.joined().contains("exists: pass --force"), "\(run.err)")
                #expect(try FileManager.default.contentsOfDirectory(atPath: dir + "/keys") == [name], "nothing else written")
            }
        }
    }

    @Test func aDanglingLinkIsRefusedToo() throws {
        let dir = try scratch()
        try FileManager.default.createDirectory(atPath: dir + "/keys", withIntermediateDirectories: false, attributes: [.posixPermissions: 0o700])
        try FileManager.default.createSymbolicLink(atPath: dir + "/keys/dev-signing-key.pem", withDestinationPath: dir + "/nowhere")
        let run = runCommand(["dev", "keygen", "--out", dir + "/keys"])
        #expect(run.status == 1)
        #expect(!FileManager.default.fileExists(atPath: dir + "/nowhere"), "created through the link")
    }

    @Test func existingKeysAreKeptUnlessForced() throws {
        let dir = try scratch() + "/keys"
        #expect(runCommand(["dev", "keygen", "--out", dir]).status == 0)
        let first = try Data(contentsOf: URL(fileURLWithPath: dir + "/dev-signing-key.pem"))
        let again = runCommand(["dev", "keygen", "--out", dir])
        #expect(again.status == 1 && again.err.joined().contains("dev-signing-key.pem exists: pass --force"), "\(again.err)")
        #expect(try Data(contentsOf: URL(fileURLWithPath: dir + "/dev-signing-key.pem")) == first)
        let forced = runCommand(["dev", "keygen", "--out", dir, "--force"])
        #expect(forced.status == 0, "\(forced.err)")
        #expect(try Data(contentsOf: URL(fileURLWithPath: dir + "/dev-signing-key.pem")) != first)
        #expect(try mode(dir + "/dev-signing-key.pem") == 0o600)
        #expect(try FileManager.default.contentsOfDirectory(atPath: dir).sorted() == ["dev-jwks.json", "dev-signing-key.pem", "kid"])
    }

    /// A folder others may write (they could swap the files afterwards), a link to a folder, or a file: refused.
    @Test(arguments: ["group-writable", "world-writable", "link", "file"])
    func aFolderOthersCouldTamperWithIsRefused(kind: String) throws {
        let dir = try scratch()
        let out = dir + "/keys"
        switch kind {
        case "group-writable", "world-writable":
            try FileManager.default.createDirectory(atPath: out, withIntermediateDirectories: false,
                                                    attributes: [.posixPermissions: kind == "group-writable" ? 0o770 : 0o707])
        case "link":
            try FileManager.default.createDirectory(atPath: dir + "/real", withIntermediateDirectories: false, attributes: [.posixPermissions: 0o700])
            try FileManager.default.createSymbolicLink(atPath: out, withDestinationPath: dir + "/real")
        default:
            try "".write(toFile: out, atomically: false, encoding: .utf8)
        }
        let run = runCommand(["dev", "keygen", "--out", out])
        #expect(run.status == 1, "\(run.err)")
        #expect(!FileManager.default.fileExists(atPath: out + "/dev-signing-key.pem"))
        #expect(!FileManager.default.fileExists(atPath: dir + "/real/dev-signing-key.pem"))
    }
}
