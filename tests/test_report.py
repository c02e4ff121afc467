"""The report's reproduced-vs-paper colouring: better is green whichever way a metric points."""
import re

from towers.report import table_html

GREEN, RED = "#d9f2d9", "#f7d4d4"


def cell_colours(page: str, column: str) -> list[str]:
    """The background colour of each body cell of `column` ("" where none), in row order."""
    headers = re.findall(r'<th id="T_\w+_level0_col(\d+)"[^>]*>([^<]*)</th>', page)
    col = next(i for i, name in headers if name == column)
    cells = re.findall(rf'<td id="T_\w+_row(\d+)_col{col}"', page)
    styles = dict(re.findall(r"#T_\w+_row(\d+)_col" + col + r"[^{]*\{\s*background-color:\s*(#\w+)", page))
    return [styles.get(row, "") for row in cells]


def test_diff_colours_follow_each_metric_direction(tmp_path):
    path = tmp_path / "t.csv"
    path.write_text("model,MRR@10,MRR@10 paper,ms/query,ms/query paper,pairs,pairs paper\n"
                    "a,0.40,0.30,90,80,10,5\n"
                    "b,0.20,0.30,40,80,3,5\n")
    page = table_html(path)
    assert cell_colours(page, "MRR@10 diff") == [GREEN, RED]      # higher quality is better
    assert cell_colours(page, "ms/query diff") == [RED, GREEN]    # lower latency is better
    assert cell_colours(page, "pairs diff") == ["", ""]           # a count: neither
