"""How deeply a `lake query` statement nests, refused before any parser recurses into it.

Parsers recurse per nesting level: sqlglot raised Python's `RecursionError` at ~48 nested
parentheses, Sail took 90 s to plan 24 nested scalar subqueries, and a chain of 1,000
`1 + 1 + ...` terms crashed the embedded Sail server (SIGSEGV) with the process around it.
So each engine's check counts the nesting on the statement's tokens, by that engine's own
tokenizer (brackets of any kind and CASE ... END), and refuses more than `MAX_NESTING`
levels; the depth of the parsed tree (operator chains nest without brackets) is held to
`MAX_DEPTH`. TPC-DS's 99 queries nest at most 7 levels of brackets and 28 tree levels.
"""

from collections.abc import Iterable, Iterator

from lake_assets.core.errors import UsageError

#: Brackets and CASE ... END, one inside the other.
MAX_NESTING = 16
#: Levels of the parsed statement's tree (each operator of `a + b + c ...` is one).
MAX_DEPTH = 128

OPENERS = frozenset({"(", "[", "{", "CASE"})
CLOSERS = frozenset({")", "]", "}", "END"})


def deepest(words: Iterable[str]) -> int:
    """The deepest nesting a statement's bracket and CASE/END tokens reach (other words are ignored)."""
    depth = deepest_seen = 0
    for word in words:
        if word in OPENERS:
            depth += 1
            deepest_seen = max(deepest_seen, depth)
        elif word in CLOSERS:
            depth -= 1
    return deepest_seen


def check_nesting(words: Iterable[str]) -> None:
    """Refuse a statement whose tokens nest deeper than `MAX_NESTING`."""
    depth = deepest(words)
    if depth > MAX_NESTING:
        raise UsageError(f"lake query reads statements nested at most {MAX_NESTING} levels deep (brackets, "
                         f"subqueries, CASE); this one nests {depth}")


def check_spark(sql: str) -> None:
    """`check_nesting` on sqlglot's Spark tokens (a TokenError, e.g. an open quote, is the caller's to report)."""
    from sqlglot import tokenize
    from sqlglot.tokens import TokenType

    words = {TokenType.L_PAREN: "(", TokenType.R_PAREN: ")", TokenType.L_BRACKET: "[", TokenType.R_BRACKET: "]",
             TokenType.L_BRACE: "{", TokenType.R_BRACE: "}", TokenType.CASE: "CASE", TokenType.END: "END"}
    check_nesting(words.get(token.token_type, "") for token in tokenize(sql, read="spark"))


def check_duckdb(sql: str) -> None:
    """`check_nesting` on DuckDB's own tokens."""
    check_nesting(_duckdb_words(sql))


def _duckdb_words(sql: str) -> Iterator[str]:
    """The first word of each DuckDB operator and keyword token (`duckdb.tokenize` gives only where
    each token starts and its kind; a token's text runs to the next one, comments included)."""
    import duckdb

    tokens = duckdb.tokenize(sql)
    ends = [start for start, _ in tokens[1:]] + [len(sql)]
    for (start, kind), end in zip(tokens, ends):
        if kind in (duckdb.token_type.operator, duckdb.token_type.keyword):
            text = sql[start:end].strip()
            yield text[:1] if kind == duckdb.token_type.operator else text.split(maxsplit=1)[0].upper()


def too_deep(depth: int | None = None) -> UsageError:
    """The refusal of a statement whose parsed tree is deeper than `MAX_DEPTH` (or than the parser could go)."""
    found = f"this one nests {depth}" if depth is not None else "this one nests deeper than its parser can follow"
    return UsageError(f"lake query reads statements whose expressions nest at most {MAX_DEPTH} levels deep (each "
                      f"operator of a chain such as 1 + 1 + ... is one); {found}")
