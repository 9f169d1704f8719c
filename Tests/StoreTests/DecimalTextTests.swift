// The one reader of unsigned decimal text in Store (a command tag's count, a migration's number): digits only, and
// nothing beyond Int.
@testable import Store
import Testing

@Suite struct DecimalTextTests {
    @Test(arguments: [
        ("0", 0), ("7", 7), ("42", 42), ("000123", 123), ("9223372036854775807", Int.max),
        ("9223372036854775808", nil), ("99999999999999999999", nil), ("", nil), ("+1", nil), ("-1", nil), ("1a", nil),
        (" 1", nil), ("1 ", nil), ("١٢", nil), ("1.5", nil),
    ] as [(String, Int?)])
    func onlyDigitsThatFitAnIntAreANumber(_ text: String, _ value: Int?) {
        #expect(Int(asciiDigits: text.utf8) == value)
    }

    @Test(arguments: [("001_users.sql", 1), ("120_x.sql", 120), ("99999999999999999999_big.sql", 0)] as [(String, Int)])
    func aMigrationIsNumberedByItsDigits(_ name: String, _ number: Int) {
        #expect(Migration(name: name, sql: "").number == number)
    }
}
