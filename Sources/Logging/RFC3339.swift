// RFC 3339 timestamps in UTC, written and read by arithmetic (no Foundation, no time zone database): log lines,
// answers and the operators' commands.

/// RFC 3339 date-times in UTC.
public enum RFC3339 {
    /// The earliest and latest instants with a four-digit year: 0000-01-01T00:00:00Z, 9999-12-31T23:59:59Z.
    public static let representable: ClosedRange<Int64> = -62_167_219_200 ... 253_402_300_799

    /// Formats Unix seconds as `YYYY-MM-DDTHH:MM:SSZ`; instants outside `representable` are clamped to it.
    public static func format(unixSeconds: Int64) -> String {
        let seconds = min(max(unixSeconds, representable.lowerBound), representable.upperBound)
        let days = seconds >= 0 ? seconds / 86_400 : (seconds - 86_399) / 86_400
        let secondOfDay = seconds - days * 86_400
        let (year, month, day) = civil(fromDays: days)
        // 20 bytes written in place (every log line and session answer carries one).
        return String(unsafeUninitializedCapacity: 20) { out in
            var at = 0
            func put(_ value: Int64, _ width: Int, then separator: UInt8) {
                var rest = value
                for index in stride(from: at + width - 1, through: at, by: -1) {
                    out[index] = UInt8(ascii: "0") + UInt8(rest % 10)
                    rest /= 10
                }
                out[at + width] = separator
                at += width + 1
            }
            put(year, 4, then: UInt8(ascii: "-"))
            put(month, 2, then: UInt8(ascii: "-"))
            put(day, 2, then: UInt8(ascii: "T"))
            put(secondOfDay / 3_600, 2, then: UInt8(ascii: ":"))
            put(secondOfDay / 60 % 60, 2, then: UInt8(ascii: ":"))
            put(secondOfDay % 60, 2, then: UInt8(ascii: "Z"))
            return at
        }
    }

    /// Proleptic Gregorian date of a day count since 1970-01-01 (H. Hinnant's `civil_from_days`).
    package static func civil(fromDays days: Int64) -> (year: Int64, month: Int64, day: Int64) {
        let z = days + 719_468
        let era = (z >= 0 ? z : z - 146_096) / 146_097
        let dayOfEra = z - era * 146_097
        let yearOfEra = (dayOfEra - dayOfEra / 1_460 + dayOfEra / 36_524 - dayOfEra / 146_096) / 365
        let dayOfYear = dayOfEra - (365 * yearOfEra + yearOfEra / 4 - yearOfEra / 100)
        let monthIndex = (5 * dayOfYear + 2) / 153
        let day = dayOfYear - (153 * monthIndex + 2) / 5 + 1
        let month = monthIndex < 10 ? monthIndex + 3 : monthIndex - 9
        return (yearOfEra + era * 400 + (month <= 2 ? 1 : 0), month, day)
    }

    /// The Unix seconds (fraction dropped) of an RFC 3339 date-time (`2026-11-29T12:00:00Z`,
    /// `2026-11-29T13:00:00.5+01:00`; `T` and `Z` in either case), or nil for anything else: a missing offset, a
    /// leap second, a day the month does not have, year 0000 or an offset of 16 hours or more (PostgreSQL takes
    /// neither), more than 9 fractional digits.
    /// Linear, at most 40 characters.
    public static func unixSeconds(parsing text: String) -> Int64? {
        let bytes = Array(text.utf8)
        guard bytes.count >= 20, bytes.count <= 40 else { return nil }
        var index = 0
        func number(_ width: Int) -> Int64? {
            guard index + width <= bytes.count else { return nil }
            var value: Int64 = 0
            for byte in bytes[index..<(index + width)] {
                guard byte >= 0x30, byte <= 0x39 else { return nil }
                value = value * 10 + Int64(byte - 0x30)
            }
            index += width
            return value
        }
        func expect(_ allowed: String) -> Bool {
            guard index < bytes.count, allowed.utf8.contains(bytes[index]) else { return false }
            index += 1
            return true
        }
        guard let year = number(4), expect("-"), let month = number(2), expect("-"), let day = number(2), expect("Tt"),
              let hour = number(2), expect(":"), let minute = number(2), expect(":"), let second = number(2),
              year >= 1, (1...12).contains(month), day >= 1, day <= daysIn(month: month, year: year),
              hour <= 23, minute <= 59, second <= 59 else { return nil }
        if index < bytes.count, bytes[index] == UInt8(ascii: ".") {
            index += 1
            let digits = bytes[index...].prefix { $0 >= 0x30 && $0 <= 0x39 }.count
            guard (1...9).contains(digits) else { return nil }
            index += digits
        }
        var offset: Int64 = 0
        if expect("Zz") {
            offset = 0
        } else {
            guard index < bytes.count, bytes[index] == UInt8(ascii: "+") || bytes[index] == UInt8(ascii: "-") else { return nil }
            let sign: Int64 = bytes[index] == UInt8(ascii: "-") ? -1 : 1
            index += 1
            // PostgreSQL takes offsets below 16 hours; real ones span -12:00...+14:00.
            guard let offsetHour = number(2), expect(":"), let offsetMinute = number(2), offsetHour <= 15, offsetMinute <= 59 else {
                return nil
            }
            offset = sign * (offsetHour * 3_600 + offsetMinute * 60)
        }
        guard index == bytes.count else { return nil }
        return days(year: year, month: month, day: day) * 86_400 + hour * 3_600 + minute * 60 + second - offset
    }

    package static func daysIn(month: Int64, year: Int64) -> Int64 {
        switch month {
        case 2: (year % 4 == 0 && year % 100 != 0) || year % 400 == 0 ? 29 : 28
        case 4, 6, 9, 11: 30
        default: 31
        }
    }

    /// Days since 1970-01-01 of a proleptic Gregorian date (H. Hinnant's `days_from_civil`, the inverse of `civil`).
    package static func days(year: Int64, month: Int64, day: Int64) -> Int64 {
        let y = month <= 2 ? year - 1 : year
        let era = (y >= 0 ? y : y - 399) / 400
        let yearOfEra = y - era * 400
        let dayOfYear = (153 * (month > 2 ? month - 3 : month + 9) + 2) / 5 + day - 1
        let dayOfEra = yearOfEra * 365 + yearOfEra / 4 - yearOfEra / 100 + dayOfYear
        return era * 146_097 + dayOfEra - 719_468
    }
}
