"""Checks paper/pdf.py's layout workarounds: `python paper/test_pdf.py` (run by `just test`).

The smoke paper's claims table (paper/testdata/claims-table.md) is placed at 40 positions, one
paragraph apart. MuPDF's Story restarts from the top when the table ends on a page's bottom edge;
the test asserts that this happens at one position at least (so the test exercises the fault;
if a MuPDF upgrade fixes it, drop SHRINKS from pdf.py) and that render() lays out every
position, each in as many pages as the one before or one more; and that a heading the
Markdown has twice is not taken for a restart.
"""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
import pdf  # noqa: E402

here = Path(__file__).parent
table = (here / "testdata" / "claims-table.md").read_text()
failed_plain, pages = [], []
for pad in range(40):
    text = "# Claims table\n\n" + "x\n\n" * pad + table
    if pdf.layout(text, here, 0) is None:
        failed_plain.append(pad)
    data = pdf.render(text, here, f"claims table after {pad} paragraphs")
    pages.append(pdf.pymupdf.open(stream=data, filetype="pdf").page_count)
# one page more per ~25 paragraphs of padding, never a runaway layout
assert all(b - a in (0, 1) for a, b in zip(pages, pages[1:])) and pages[-1] <= 6, pages
assert failed_plain, "the claims table laid out at every position without a retry: has MuPDF fixed its restart? drop pdf.SHRINKS"
# a heading the Markdown has twice is not taken for a restart
assert pdf.layout("# T\n\n## Notes\n\nabc\n\n## Notes\n\ndef\n", here, 0) is not None
print(f"ok: 40 positions rendered; the plain layout restarted at {failed_plain}, the retry placed them")
