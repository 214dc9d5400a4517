"""How lessons meet failures: the error_type classification, the dedup key of
a symptom, the relevance of a lesson to an error text, and the
`related_errors` text an agent appends to a failed tool result.

Pure functions over text. Must never touch storage or the clock: store.py
owns those.
"""

from __future__ import annotations

import re
import unicodedata

import msgspec
import numpy as np

from memsvc.lessons.model import ERROR_TYPE_PREFIX, Lesson

MIN_SIMILARITY = 0.5
"Cosine at which an embedding alone makes a lesson related."
RENDERED_FIELD_CHARS = 600
"Longest field quoted in related_errors; the full text is in the records."

# -- error_type classification -------------------------------------------------
# Checked in order against symptom + cause (or a lookup's error text); the first
# class with a matching pattern wins. "missing" comes before "invalid" so that a
# required parameter reported as invalid-because-absent reads as required_param.
ERROR_CLASSES: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("tool_not_exist", (
        r"\b(unknown|undefined|unsupported|unrecognized|invalid|no such) (tool|function)\b",
        r"\b(tool|function)\b.{0,60}\b(not found|does ?n[o']t exist|not exist|not available|not registered)",
        r"工具不存在|找不到工具|沒有這個工具|没有这个工具|ツールが(存在しません|見つかりません)")),
    ("required_param", (
        r"\bmissing\b.{0,40}\b(param(eter)?s?|arguments?|fields?|keys?|properties|property|inputs?)\b",
        r"\b(param(eter)?s?|arguments?|fields?|keys?|propert(y|ies))\b.{0,60}\b(is|are) required\b",
        r"\brequired\b.{0,40}\b(not (provided|given|set|specified)|missing)\b",
        r"\bmust (be (provided|specified|given)|not be empty)\b",
        r"缺少(必要|必填)?(参数|參數|字段|欄位)|必填|必須(提供|指定)|必须(提供|指定)|必須パラメータ")),
    ("permission", (
        r"\b(permission|access) denied\b|\bforbidden\b|\bunauthori[sz]ed\b|\bnot (allowed|permitted)\b",
        r"\beacces\b|\beperm\b|\binsufficient (privileges?|permissions?|scopes?)\b|\b(http )?40[13]\b",
        r"权限|權限|拒绝访问|拒絕存取|沒有權限|権限がありません|アクセスが拒否")),
    ("timeout", (
        r"\btime[sd]?[ -]?out\b|\btimeout\b|\bdeadline exceeded\b|\btook too long\b|\betimedout\b",
        r"超时|超時|逾時|タイムアウト")),
    ("invalid_param", (
        r"\binvalid\b.{0,40}\b(param(eter)?s?|arguments?|values?|inputs?|types?|formats?|json|syntax|fields?)\b",
        r"\b(param(eter)?s?|arguments?|values?|fields?)\b.{0,60}\b(is|are) (invalid|not valid)\b",
        r"\bexpected\b.{0,60}\b(got|but|received|instead)\b|\bmalformed\b|\bout of range\b",
        r"\bunexpected (keyword|argument|field|token|type)\b|\b(failed|unable) to (parse|decode|unmarshal)\b",
        r"\b(type|value)error\b|\bmust be (a|an|one of|of type|between|positive|non-negative)\b",
        r"参数(无效|错误)|參數(無效|錯誤)|格式(错误|錯誤)|無効な(パラメータ|引数)")),
    ("no_result", (
        r"\bno (results?|matches|match|data|records?|items?|entries|rows|documents?|hits)\b",
        r"\b(not found|no such file|nothing (found|matched)|empty (result|response|output)s?)\b",
        r"\b(returned|found) (nothing|0 results?)\b|\b404\b",
        r"没有(结果|找到)|沒有(結果|找到)|找不到|查无|查無|無結果|見つかりません|結果がありません")),
)
_CLASS_PATTERNS = [(name, re.compile("|".join(f"(?:{p})" for p in patterns)))
                   for name, patterns in ERROR_CLASSES]


def classify(text: str) -> str:
    """The error class of `text`: one of ERROR_CLASSES' names, else "other"."""
    folded = fold(text)
    return next((name for name, pattern in _CLASS_PATTERNS if pattern.search(folded)), "other")


# -- text normalization and relevance --------------------------------------------
_VOLATILE = (  # parts of an error text that change on every occurrence of the same failure
    (re.compile(r"\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b"), "<id>"),
    (re.compile(r"\b\d{4}-\d{2}-\d{2}[t ]\d{2}:\d{2}(:\d{2}(\.\d+)?)?(z|[+-]\d{2}:?\d{2})?\b"), "<time>"),
    (re.compile(r"\b(?=[0-9a-f]*\d)(?=[0-9a-f]*[a-f])[0-9a-f]{8,}\b"), "<id>"),
    (re.compile(r"\b0x[0-9a-f]+\b"), "<addr>"),
)
_CJK = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff"
_TOKEN = re.compile(rf"[{_CJK}]+|[^\W{_CJK}]+")
_CJK_START = re.compile(f"[{_CJK}]")
_STOPWORDS = frozenset(
    "the an is are was were be to of for in on at by and or "
    "with this that it its from as error errors failed failure exception".split())


def fold(text: str) -> str:
    return " ".join(unicodedata.normalize("NFKC", text).casefold().split())


def normalize_symptom(symptom: str) -> str:
    """The dedup key of a symptom: case, width, spacing and volatile ids ignored."""
    folded = fold(symptom)
    for pattern, placeholder in _VOLATILE:
        folded = pattern.sub(placeholder, folded)
    return folded.rstrip(" .!:;")


def terms(text: str) -> set[str]:
    """Words of 2+ characters (minus stopwords), and character bigrams of CJK runs."""
    found: set[str] = set()
    for token in _TOKEN.findall(fold(text)):
        if not _CJK_START.match(token):
            if len(token) >= 2 and token not in _STOPWORDS:
                found.add(token)
        elif len(token) == 1:
            found.add(token)
        else:
            found.update(token[i:i + 2] for i in range(len(token) - 1))
    return found


class Failure(msgspec.Struct, frozen=True):
    """A failed call's error text, analysed once for scoring every lesson of its tool."""

    text: str
    "Folded: NFKC, casefolded, spacing collapsed."
    terms: frozenset[str]
    error_class: str

    @classmethod
    def of(cls, error_text: str) -> Failure:
        return cls(fold(error_text), frozenset(terms(error_text)), classify(error_text))


def relevance(lesson: Lesson, failure: Failure) -> float:
    """Lexical score of a lesson for a failure (see lessons.Lessons.lookup)."""
    text, symptom = failure.text, fold(lesson.symptom)
    score = 0.0
    if min(len(text), len(symptom)) >= 4 and (symptom in text or text in symptom):
        score += 1.0
    user_keywords = (k.casefold() for k in lesson.keywords if not k.startswith(ERROR_TYPE_PREFIX))
    score += 0.5 * sum(1 for keyword in user_keywords if len(keyword) >= 2 and keyword in text)
    known = terms(f"{lesson.symptom}\n{lesson.cause}")
    smaller = min(len(failure.terms), len(known))
    shared = len(failure.terms & known)
    if smaller and shared >= min(2, smaller) and shared / smaller >= 0.5:
        score += shared / smaller
    if failure.error_class != "other" and failure.error_class == lesson.error_type:
        score += 0.25
    return score


def cosines(query: np.ndarray, vectors: np.ndarray) -> np.ndarray:
    """Cosine of `query` with each row of `vectors`; 0 where either has no length."""
    norms = np.linalg.norm(vectors, axis=1) * np.linalg.norm(query)
    scores: np.ndarray = np.divide(vectors @ query, norms, out=np.zeros(len(vectors), dtype=np.float64),
                                   where=norms > 0)
    return scores


def render_related(tool_name: str, lessons: list[Lesson]) -> str:
    """The text an agent appends to a failed tool result; empty when nothing is related."""
    if not lessons:
        return ""

    def field(text: str) -> str:
        flat = " ".join(text.split())
        return flat if len(flat) <= RENDERED_FIELD_CHARS else flat[:RENDERED_FIELD_CHARS - 3] + "..."

    heading = (f"related_errors: {len(lessons)} earlier lesson(s) for tool {tool_name}, best first. "
               "Apply a fix only if it fits this failure.")
    lines = [heading]
    for number, lesson in enumerate(lessons, 1):
        lines.append(f"{number}. [{lesson.error_type}] symptom: {field(lesson.symptom)}")
        if lesson.cause:
            lines.append(f"   cause: {field(lesson.cause)}")
        lines.append(f"   fix: {field(lesson.action)}")
    return "\n".join(lines)
