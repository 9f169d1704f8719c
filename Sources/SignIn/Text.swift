// Small text rules shared by the request parsers, the settings and the commands.

extension StringProtocol {
    /// Drops leading and trailing spaces, tabs, CR and LF (HTTP's optional whitespace, a line read from a file).
    package func trimmingASCIIWhitespace() -> String {
        let isSpace: (Character) -> Bool = { $0 == " " || $0 == "\t" || $0 == "\r" || $0 == "\n" || $0 == "\r\n" }
        guard let first = firstIndex(where: { !isSpace($0) }), let last = lastIndex(where: { !isSpace($0) }) else {
            return ""
        }
        return String(self[first...last])
    }
}
