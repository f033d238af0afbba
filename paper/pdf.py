"""Renders the generated Markdown paper to PDF with markdown-pdf (PyMuPDF), offline.

    python paper/pdf.py paper/paper.md paper/paper.pdf

Images are resolved relative to the Markdown file. The PDF carries no dates and is compressed,
so the same Markdown and figures give the same bytes; an unchanged PDF is not rewritten.
`paper/test_pdf.py` (run by `just test`) checks the layout's workarounds below.
"""
import hashlib, os, re, sys, tempfile
from collections import Counter
from pathlib import Path

import pymupdf
from markdown_pdf import MarkdownPdf, Section

CSS = """
body { font-family: sans-serif; font-size: 10px; }
table { font-size: 8px; border-collapse: collapse; }
td, th { border: 1px solid #999; padding: 2px; }
img { width: 96%; }
"""
# bottom borders raised by these points, tried in order: the same Markdown always takes the same
# attempts, so the PDF stays reproducible
SHRINKS = (0, 3, 6, 9)


def layout(text, root, shrink):
    """markdown-pdf's add_section (1.13.3), with the page's bottom border raised by `shrink`
    points and its page loop checked. MuPDF's Story (PyMuPDF 2.0, MuPDF 1.28) never ends when an
    element fits no page (a 2250x720 figure at width 100%: hence 96%), and restarts from the top
    when a table ends on a page's bottom edge (the smoke paper's claims table, at one position
    in 0.5 pt). Returns the MarkdownPdf, or None when the layout placed a heading more often
    than the Markdown has it (it went back) or passed 300 pages."""
    pdf = MarkdownPdf(toc_level=2)
    section = Section(text, root=str(root), paper_size="A4-L")
    story = pymupdf.Story(html=pdf.m_d.render(pdf.apply_plugins(section.text)), archive=section.root, user_css=CSS)
    # a heading placed more often than the Markdown has it means the layout went back
    expected = Counter(m.strip() for m in re.findall(r"^#+ (.*)$", text, flags=re.M))
    seen, repeated = Counter(), []

    def record(pos):
        if pos.heading and pos.open_close & 1 and pos.text:
            seen[pos.text] += 1
            if seen[pos.text] > expected.get(pos.text.strip(), 1):
                repeated.append(pos.text)
        pdf._recorder(pos)

    left, top, right, bottom = section.borders
    more = 1
    while more:
        if section.page_count >= 300 or repeated:
            return None
        pdf.page_num += 1
        section.page_count += 1
        device = pdf.writer.begin_page(section.rect)
        more, _ = story.place(section.rect + (left, top, right, bottom - shrink))
        story.element_positions(record, {"toc": section.toc, "pdfile": pdf})
        story.draw(device)
        pdf.writer.end_page()
    pdf.sections.append(section)
    return pdf


def render(text, root, name):
    """The PDF's bytes, from the first of SHRINKS whose layout ends; `name` for messages."""
    for shrink in SHRINKS:
        pdf = layout(text, root, shrink)
        if pdf is not None:
            break
        print(f"{name}: the PDF layout restarted or never ended with the bottom border raised {shrink} pt; trying the next")
    else:
        sys.exit(f"{name}: the PDF layout failed with every bottom border in {SHRINKS} (an element that fits no page?)")
    with tempfile.TemporaryDirectory() as tmp:
        raw = Path(tmp) / "raw.pdf"
        pdf.save(str(raw))
        doc = pymupdf.open(str(raw))
        doc.set_metadata({"title": "Instability of downstream scores during LLM pretraining (reproduction)", "creationDate": "", "modDate": "", "producer": "", "creator": ""})
        data = doc.tobytes(deflate=True, deflate_images=True, garbage=4, no_new_id=True)
    # the file identifier MuPDF writes is random: make it the hash of the rest of the file
    blank = re.sub(rb"/ID\[<[0-9A-Fa-f]+><[0-9A-Fa-f]+>\]", b"/ID[<><>]", data)
    digest = hashlib.md5(blank).hexdigest().upper().encode()
    return blank.replace(b"/ID[<><>]", b"/ID[<" + digest + b"><" + digest + b">]")


def main(src, out):
    text = src.read_text()
    # markdown-pdf looks images up below one root folder: take the folder that holds the paper
    # and every image, and rewrite the image paths relative to it
    images = [(src.parent / m).resolve() for m in re.findall(r"!\[[^\]]*\]\(([^)]+)\)", text)]
    missing = [str(i) for i in images if not i.is_file()]
    if missing:
        sys.exit(f"{src}: images missing: {', '.join(missing)}")
    root = Path(os.path.commonpath([src.parent.resolve(), *[i.parent for i in images]]))
    text = re.sub(r"(!\[[^\]]*\]\()([^)]+)\)", lambda m: m.group(1) + (src.parent / m.group(2)).resolve().relative_to(root).as_posix() + ")", text)
    data = render(text, root, src)
    if out.exists() and out.read_bytes() == data:
        print(f"unchanged {out}")
    else:
        part = out.with_suffix(".pdf.tmp")
        part.write_bytes(data)
        os.replace(part, out)
        print(f"wrote     {out} ({len(data) / 1e6:.1f} MB)")


if __name__ == "__main__":
    main(Path(sys.argv[1]), Path(sys.argv[2]))
