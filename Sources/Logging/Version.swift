// The release this tree builds: the one place its version number lives (`make deb` reads it from here).

public enum Version {
    /// The release number; the Debian package's version (`make deb`).
    public static let number = "0.9.0"
    /// `git describe --tags --always --dirty` of the tree at build time (Plugins/BuildStamp), so two builds of
    /// one release number can be told apart; "unknown" when built outside a git checkout.
    public static let build = buildDescription
    /// What `tokensignin --version` prints.
    public static var line: String { "tokensignin \(number) (\(build))" }
}
