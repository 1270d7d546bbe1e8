"""kiln.decompile: every variant kiln compiled for a function, as Python that does the same."""

import types

import torch
from e2e_support import assert_same, eager_item
from torch import nn

import kiln
from kiln.symexec.bytecode import RESUME_PREFIX


def _breaks_twice(x, y):
    a = x.sin() + y
    n = eager_item(a.sum())
    b = a * 2
    if b.sum() > 0:
        return b.cos(), n
    return b, n


def _run_decompiled(part, globals_, *args):
    """Run a decompiled part's source (recompiled) as a function."""
    return types.FunctionType(part.recompile(), globals_)(*args)


def test_a_function_decompiles_to_its_replacement_and_resume_functions():
    compiled = kiln.compile(_breaks_twice, backend="eager")
    x, y = torch.randn(4), torch.randn(4)
    for args in ((x, y), (-x.abs(), -y.abs())):
        assert_same(compiled(*args), _breaks_twice(*args))
    result = kiln.decompile(compiled)
    assert isinstance(result, kiln.Decompiled)
    assert result.exact and result.why is None
    kinds = [part.kind for _, part in result.parts]
    # the root's replacement, its resume function (after eager_item), that resume function's
    # replacement (the branch) and each branch's resume function with its replacement
    assert kinds[:3] == ["replacement", "resume", "replacement"]
    assert kinds.count("resume") == 3
    resume = result.parts[1][1]
    assert resume.code.co_name.startswith(RESUME_PREFIX)
    assert "n = ___stack0" in resume.source and "b = a * 2" in resume.source
    assert "if b.sum() > 0:" in resume.source
    assert "__kiln_resume_in__breaks_twice_at_" in result.parts[0][1].source
    assert "eager_item(" in result.parts[0][1].source
    # the resume function's source runs like its bytecode, at the user's lines
    again = resume.recompile()
    assert again.co_filename == _breaks_twice.__code__.co_filename
    a = x.sin() + y
    expected = types.FunctionType(resume.code, _breaks_twice.__globals__)(3.0, a)
    assert_same(_run_decompiled(resume, _breaks_twice.__globals__, 3.0, a), expected)
    text = str(result)
    assert text.startswith("# kiln.decompile(_breaks_twice)") and "def _breaks_twice(x, y):" in text


def test_a_code_object_gives_the_same_as_its_function():
    compiled = kiln.compile(_breaks_twice, backend="eager")
    compiled(torch.randn(3), torch.randn(3))
    by_code = kiln.decompile(_breaks_twice.__code__)
    assert by_code.source == kiln.decompile(compiled).source == kiln.decompile(_breaks_twice).source
    # a resume function's code alone: itself, then what kiln compiled for it
    resume_code = by_code.parts[1][1].code
    alone = kiln.decompile(resume_code)
    assert alone.parts[0][1].code is resume_code and alone.parts[0][1].kind == "resume"
    assert alone.exact


class _Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 4)

    def forward(self, x):
        h = self.fc(x).relu()
        scale = eager_item(h.mean())
        return h * scale + x


def test_a_compiled_module_decompiles_its_forward():
    torch.manual_seed(0)
    module = _Block()
    compiled = kiln.compile(module, backend="eager")
    x = torch.randn(2, 4)
    assert_same(compiled(x), module(x))
    result = kiln.decompile(compiled)
    assert result.exact
    assert kiln.decompile(module).source == result.source
    resume = next(part for _, part in result.parts if part.kind == "resume")
    assert "scale = ___stack0" in resume.source and "return h * scale + x" in resume.source
    replacement = result.parts[0][1]
    assert replacement.source.startswith("def forward(self, x):")
    # the replacement's source compiles back to the very instructions kiln generated
    assert replacement.recompile().co_code == replacement.code.co_code


def _risky(t, fail):
    if fail:
        raise ValueError("boom")
    return t


def _break_in_try(x, fail):
    y = x + 1
    try:
        z = _risky(y, eager_item(fail))  # a break inside a try block
    except ValueError:
        z = y * 0
    return z - 1


def test_what_cannot_be_decompiled_exactly_says_why_and_shows_the_disassembly():
    """A break inside a try block: the replacement's try block is not decompiled from its
    instructions; in this process its source is the text kiln compiled it from (linecache),
    checked; without that text it says why and shows the disassembly."""
    import linecache

    compiled = kiln.compile(_break_in_try, backend="eager")
    x = torch.randn(3)
    for fail in (torch.tensor(0), torch.tensor(1)):
        assert_same(compiled(x, fail), _break_in_try(x, fail))
    result = kiln.decompile(compiled)
    assert result.exact, result.why
    replacement = result.parts[0][1]
    assert replacement.kind == "replacement" and "try:" in replacement.source
    # the resume functions (the rest of the try body, the handler) are decompiled exactly
    resumes = [part for _, part in result.parts if part.kind == "resume"]
    assert resumes and all(part.exact for part in resumes)
    assert any("raise ___stack" in part.source and "except ValueError:" in part.source for part in resumes)
    filename = replacement.code.co_filename
    saved = linecache.cache.pop(filename)
    try:
        result = kiln.decompile(compiled)
        assert not result.exact
        replacement = result.parts[0][1]
        assert replacement.kind == "replacement" and not replacement.exact
        assert replacement.why == "try blocks in replacement code are not decompiled"
        assert "try blocks in replacement code are not decompiled" in result.why
        assert "CALL" in replacement.source  # dis output instead of source
        assert "not decompiled exactly" in str(replacement)
    finally:
        linecache.cache[filename] = saved


def test_a_function_kiln_never_compiled_says_so():
    def untouched(x):
        return x + 1

    result = kiln.decompile(untouched)
    assert not result.exact and "compiled nothing" in result.why and result.parts == []


def test_bad_input_is_a_clear_error():
    try:
        kiln.decompile(42)
    except TypeError as e:
        assert "kiln.decompile takes a function" in str(e) and "int" in str(e)
    else:
        raise AssertionError("no error")


def test_a_replacement_code_object_decompiles_itself_and_its_resume_functions():
    """What a trace keeps (the report decompiles it): the generated replacement, not the
    user's code, given to kiln.decompile."""
    import kiln.frameeval as fe

    compiled = kiln.compile(_breaks_twice, backend="eager")
    compiled(torch.randn(4), torch.randn(4))
    (entry,) = fe.get_cache_entries(_breaks_twice.__code__)
    result = kiln.decompile(entry.code)
    kinds = [part.kind for _, part in result.parts]
    assert kinds[:2] == ["replacement", "resume"] and result.exact, result.why
    assert str(result).startswith("# kiln.decompile(_breaks_twice): ")
