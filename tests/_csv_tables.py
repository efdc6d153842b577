"""A small table written out in the dialects people use, shared by the tests of iml.data
(tests/data/)."""

# A small table with a numeric column holding a missing value, a categorical column whose values
# contain the comma and the semicolon, and a yes/no target.
NAMES = ["age", "income (k)", "colour", "y"]
ROWS = [
    ["39", "52.5", "red", "yes"],
    ["50", "?", "blue, dark", "no"],
    ["38", "61.0", "red", "no"],
    ["53", "40.25", "green; light", "yes"],
    ["28", "33.0", "blue, dark", "no"],
]


def quoted(field: str) -> str:
    return '"' + field.replace('"', '""') + '"'


def write_csv(path, text: str, *, bom: bool = False, crlf: bool = False) -> None:
    if crlf:
        text = text.replace("\n", "\r\n")
    path.write_bytes((b"\xef\xbb\xbf" if bom else b"") + text.encode("utf-8"))


def dialect_text(delimiter: str, quote_all: bool) -> str:
    def line(fields):
        return delimiter.join(
            quoted(f) if quote_all or delimiter in f or "," in f or ";" in f else f for f in fields
        )

    return "\n".join(line(row) for row in [NAMES, *ROWS]) + "\n"
