// scripts/pgcluster from a folder PostgreSQL's user cannot enter (a clone in /root, mode 700), as root and not.
import Foundation
#if canImport(Glibc)
import Glibc
#endif
import Store
import Testing
import TestSupport

@Suite struct ClusterScriptTests {
    @Test func clusterRunsFromAPrivateFolderAndLeavesNothingBehind() throws {
        var template = Array("/tmp/tokensignin-private-XXXXXX".utf8CString)
        let made = template.withUnsafeMutableBufferPointer { mkdtemp($0.baseAddress!) }
        let outer = String(cString: try #require(made))  // mode 700, owned by whoever runs the tests
        defer { try? FileManager.default.removeItem(atPath: outer) }
        let cluster = outer + "/clone/.build/pg"
        let script = repositoryRoot + "/scripts/pgcluster"
        let environment = ProcessInfo.processInfo.environment

        if getuid() == 0 {
            // The situation being tested: the server's user cannot even look inside.
            let probe = try runProgram("/usr/sbin/runuser", ["-u", "postgres", "--", "test", "-x", outer], environment: environment)
            #expect(probe.status != 0, "postgres can enter \(outer); the test proves nothing")
        }
        let start = try runProgram(script, ["start", cluster, "55498"], environment: environment)
        #expect(start.status == 0, "\(start.stderrText)")
        let env = try runProgram(script, ["env", cluster, "55498"], environment: environment).stdoutText
        let host = try #require(env.firstMatch(of: /PGHOST='([^']*)'/)?.1)
        let connection = try Connection(conninfo: "host=\(host) port=55498 user=postgres dbname=tokensignin")
        #expect(try connection.query("SELECT 40 + 2")[0, 0] == "42")

        let privateFolder = (try? FileManager.default.destinationOfSymbolicLink(atPath: cluster + "/data"))
            .map { URL(fileURLWithPath: $0).deletingLastPathComponent().path }
        if getuid() == 0 {
            #expect(privateFolder?.hasPrefix("/tmp/tokensignin-pg.") == true, "the data should live where postgres can reach it")
        }
        let destroy = try runProgram(script, ["destroy", cluster, "55498"], environment: environment)
        #expect(destroy.status == 0, "\(destroy.stderrText)")
        #expect(!FileManager.default.fileExists(atPath: cluster))
        if let privateFolder { #expect(!FileManager.default.fileExists(atPath: privateFolder)) }
    }
}
