#!/usr/bin/env python3
"""The schedule lab page (`brigade schedule --html`) in a real browser: Chromium, headless, driven by Selenium
through chromedriver (Debian's chromium, chromium-driver and python3-selenium; scripts/install_deps.sh).

1. The page's rules: its JavaScript generators and simulator, run in the browser on many configurations
   (all ten schedules, S, M, v, recompute policies, transfer and step costs, per-stage cost factors,
   activation sizes), give the timeline `brigade schedule --json` prints for the same flags: the
   step time, the bubble, every stage's figures and memory curve, and every action's label, start, end and
   arrival. Tolerance: 1e-12 relative (the page does the C++ arithmetic in the same order, so in practice
   the numbers are equal); a configuration the CLI refuses (interleaved with M not a multiple of S,
   dualpipev with M < 2S, w > b) the page refuses too.
2. The page as a user sees it: written for one configuration, it checks itself against the C++ timeline it
   carries; then the stages slider is moved with the keyboard, the schedule is switched and a stage's cost
   slider is moved, and each time the bubble, the step time and the drawn actions (their rectangles' data
   attributes) are read back from the DOM and compared with `brigade schedule --json`.

Usage: schedule_page_browser_test.py BRIGADE_BINARY WORK_DIR. Exits 77 (ctest's skip) with the reason when
chromium, chromedriver or selenium is missing, 1 on a mismatch.
"""
import json
import math
import os
import shutil
import subprocess
import sys

SKIP = 77
TOLERANCE = 1e-12


def skip(reason):
    print(f"SKIPPED: {reason}")
    sys.exit(SKIP)


def find_browser():
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    driver = shutil.which("chromedriver") or ("/usr/bin/chromedriver" if os.path.exists("/usr/bin/chromedriver") else None)
    if not chromium:
        skip("chromium is not installed (Debian: apt-get install chromium chromium-driver python3-selenium)")
    if not driver:
        skip("chromedriver is not installed (Debian: apt-get install chromium-driver)")
    try:
        import selenium  # noqa: F401
    except ImportError:
        skip(f"selenium is not importable by {sys.executable} (Debian: apt-get install python3-selenium)")
    return chromium, driver


def start_browser(chromium, driver_path):
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = chromium
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                 "--window-size=1300,900"):
        options.add_argument(flag)
    return webdriver.Chrome(service=Service(executable_path=driver_path), options=options)


class Mismatch(Exception):
    pass


def close(a, b):
    return a == b or abs(a - b) <= TOLERANCE * max(1.0, abs(a), abs(b))


def compare_timelines(where, ours, theirs):
    """Raises Mismatch naming the first difference between the page's timeline and the CLI's."""
    def number(what, a, b):
        if not close(a, b):
            raise Mismatch(f"{where}: {what}: page {a!r}, brigade {b!r}")
    number("step time", ours["step_time"], theirs["step_time"])
    number("bubble", ours["bubble"], theirs["bubble"])
    for s, (a, b) in enumerate(zip(ours["stage_stats"], theirs["stage_stats"], strict=True)):
        for key in ("busy", "bubble", "span", "peak_in_flight", "peak_full", "peak_memory"):
            number(f"stage {s} {key}", a[key], b[key])
        if len(a["memory"]) != len(b["memory"]):
            raise Mismatch(f"{where}: stage {s} memory curve has {len(a['memory'])} points, brigade's {len(b['memory'])}")
        for k, ((t1, l1), (t2, l2)) in enumerate(zip(a["memory"], b["memory"])):
            number(f"stage {s} memory point {k} time", t1, t2)
            number(f"stage {s} memory point {k} live", l1, l2)
    if len(ours["actions"]) != len(theirs["actions"]):
        raise Mismatch(f"{where}: {len(ours['actions'])} actions, brigade has {len(theirs['actions'])}")
    for a, b in zip(ours["actions"], theirs["actions"]):
        at = f"stage {b['stage']} step {b['step']} ({b['label']})"
        for key in ("stage", "step", "kind", "label", "microbatch", "chunk", "peer"):
            if a[key] != b[key]:
                raise Mismatch(f"{where}: {at}: {key} page {a[key]!r}, brigade {b[key]!r}")
        for key in ("start", "end", "arrival"):
            if (key in a) != (key in b):
                raise Mismatch(f"{where}: {at}: {key} only on one side")
            if key in a:
                number(f"{at} {key}", a[key], b[key])


def cli_args(c, schedules=None):
    """The flags of configuration c; with `schedules`, --compare of those at c's sizes and costs."""
    args = ["schedule", "--stages", str(c["stages"]), "--microbatches", str(c["microbatches"]),
            "--virtual", str(c["virtual"]), "--recompute", c["recompute"], "--costs",
            "f={forward},b={backward},w={weight},step={step},t={transfer}".format(**c["costs"]),
            "--stage-costs", ",".join(repr(float(f)) for f in c["factors"]),
            "--memory", "full={full},boundary={boundary}".format(**c["memory"])]
    if schedules:
        return args + ["--compare", ",".join(schedules)]
    if c["schedule"] not in ("interleaved", "looped-bfs"):  # --virtual is for the schedules that take any v
        args[args.index("--virtual"):args.index("--virtual") + 2] = []
    return args + ["--schedule", c["schedule"]]


def brigade_json(brigade, args):
    """The CLI's JSON for `args`, or None when the CLI refuses them (exit 2)."""
    run = subprocess.run([brigade] + args + ["--json"], capture_output=True, text=True)
    if run.returncode == 2:
        return None
    if run.returncode != 0:
        raise Mismatch(f"brigade {' '.join(args)} failed ({run.returncode}): {run.stderr}")
    return json.loads(run.stdout)


def brigade_timelines(brigade, configs):
    """The CLI's timeline (or None: refused) per configuration, one --compare run per group of
    configurations that differ only in the schedule (a group with a refused one runs one by one)."""
    groups = {}
    for k, c in enumerate(configs):
        groups.setdefault(json.dumps({**c, "schedule": ""}, sort_keys=True), []).append(k)
    out = [None] * len(configs)
    for members in groups.values():
        names = [configs[k]["schedule"] for k in members]
        together = brigade_json(brigade, cli_args(configs[members[0]], names)) if len(set(names)) > 1 else None
        for i, k in enumerate(members):
            out[k] = together[i] if together else brigade_json(brigade, cli_args(configs[k]))
    return out


def configurations():
    """Every schedule the page generates on a spread of sizes and costs, and a few that must be refused."""
    out = []
    def add(schedule, S, M, v=1, recompute="never", f=1.0, b=2.0, w=1.0, step=0.0, t=0.0, factors=None,
            full=1.0, boundary=0.0):
        out.append({"schedule": schedule, "stages": S, "microbatches": M, "virtual": v, "recompute": recompute,
                    "costs": {"forward": f, "backward": b, "weight": w, "recompute": -1, "step": step,
                              "transfer": t},
                    "factors": factors or [1.0] * S, "memory": {"full": full, "boundary": boundary}})
    for schedule in ("gpipe", "1f1b", "zb-h1", "interleaved", "looped-bfs", "zb-h2", "zb-v", "v-half", "v-min",
                     "dualpipev"):
        for S, M in ((1, 1), (1, 3), (2, 4), (3, 6), (4, 8), (5, 5), (4, 3), (8, 8)):
            for v in ((1, 2, 3) if schedule in ("interleaved", "looped-bfs") else (1,)):
                add(schedule, S, M, v)
        for recompute in ("always", "except-last"):
            add(schedule, 4, 8, 2, recompute, boundary=0.25)
        add(schedule, 4, 8, 2, t=0.5, step=1.5)
        add(schedule, 4, 8, 2, f=1.25, b=2.75, w=0.5, factors=[1, 0.5, 1, 2.25])
        add(schedule, 3, 6, 2, recompute="always", t=0.1, factors=[2, 1, 0.75], full=3, boundary=0.5)
    add("1f1b", 2, 4, w=3.0)  # w > b: refused (as are interleaved's M = 3 on S = 4 and dualpipev's M < 2S)
    return out


def check_rules(driver, brigade):
    configs = configurations()
    script = """return JSON.stringify(arguments[0].map((c) => {
                  try { return ScheduleLab.timelineFor(c); } catch (e) { return {error: e.message}; } }));"""
    ours = json.loads(driver.execute_script(script, configs))
    refused = 0
    for c, page, theirs in zip(configs, ours, brigade_timelines(brigade, configs)):
        where = " ".join(cli_args(c))
        if theirs is None or "error" in page:
            if (theirs is None) != ("error" in page):
                raise Mismatch(f"{where}: brigade {'refuses' if theirs is None else 'accepts'} it, the page "
                               f"{'refuses: ' + page['error'] if 'error' in page else 'accepts'}")
            refused += 1
            continue
        compare_timelines(where, page, theirs)
    print(f"rules: the page's simulator gives brigade's timeline on {len(configs) - refused} configurations "
          f"(and refuses the {refused} that brigade refuses)")


def drawn(driver):
    """The timeline as the page shows it: the figures and the rectangles of the compute actions, read from
    the DOM in one call (one WebDriver round trip per attribute would take seconds)."""
    shown = driver.execute_script("""
        const figure = (id) => Number(document.getElementById(id).getAttribute("data-value"));
        return {bubble: figure("bubble"), step_time: figure("step-time"),
                actions: [...document.querySelectorAll("#timeline rect.action")].map((r) =>
                  [Number(r.dataset.stage), r.dataset.label, Number(r.dataset.start), Number(r.dataset.end)])};""")
    return shown["bubble"], shown["step_time"], [tuple(a) for a in shown["actions"]]


def compare_drawn(where, driver, theirs):
    bubble, step_time, actions = drawn(driver)
    expected = [(a["stage"], a["label"], a["start"], a["end"]) for a in theirs["actions"]
                if a["kind"] in ("F", "B", "Bi", "Bw", "R", "step")]
    if not close(bubble, theirs["bubble"]) or not close(step_time, theirs["step_time"]):
        raise Mismatch(f"{where}: the page shows bubble {bubble}, step time {step_time}; brigade "
                       f"{theirs['bubble']}, {theirs['step_time']}")
    if len(actions) != len(expected):
        raise Mismatch(f"{where}: the page draws {len(actions)} actions, brigade has {len(expected)}")
    for got, want in zip(sorted(actions), sorted(expected)):
        if got[:2] != want[:2] or not close(got[2], want[2]) or not close(got[3], want[3]):
            raise Mismatch(f"{where}: the page draws {got}, brigade has {want}")
    print(f"page: {where}: bubble {100 * bubble:.1f}%, step time {step_time:g}, {len(actions)} actions drawn "
          "as brigade computes them")


def check_page(driver, brigade, work_dir):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys
    from selenium.webdriver.support.ui import Select

    page = os.path.join(work_dir, "schedule_lab.html")
    flags = {"--schedule": "1f1b", "--stages": "4", "--microbatches": "8", "--costs": "f=1,b=2,w=1,t=0.25",
             "--stage-costs": "last=2"}
    command = lambda changes: [brigade, "schedule"] + [x for kv in {**flags, **changes}.items() for x in kv]
    subprocess.run(command({"--html": page}), check=True, capture_output=True)
    driver.get("file://" + os.path.abspath(page))
    check = driver.find_element(By.ID, "self-check")
    if check.get_attribute("data-agrees") != "true":
        raise Mismatch(f"the page's own check fails: {check.text}")
    run = lambda **changes: json.loads(subprocess.run(
        command({"--" + k.replace("_", "-"): v for k, v in changes.items()}) + ["--json"], check=True,
        capture_output=True, text=True).stdout)
    compare_drawn("as written (S=4)", driver, run())

    driver.find_element(By.ID, "stages").send_keys(Keys.ARROW_RIGHT)  # S 4 -> 5; the new stage's factor is 1
    if driver.find_element(By.ID, "stages-value").text != "5":
        raise Mismatch("the stages slider did not move to 5")
    compare_drawn("stages slider moved to 5", driver, run(stages="5", stage_costs="1,1,1,2,1"))

    Select(driver.find_element(By.ID, "schedule")).select_by_value("zb-v")
    driver.find_element(By.ID, "factor-0").send_keys(Keys.ARROW_RIGHT)  # stage 0's factor 1 -> 1.25
    compare_drawn("zb-v, stage 0's cost slider moved to 1.25", driver,
                  run(schedule="zb-v", stages="5", stage_costs="1.25,1,1,2,1"))


def main():
    if len(sys.argv) != 3:
        print(__doc__.strip().splitlines()[-2], file=sys.stderr)
        return 2
    brigade, work_dir = sys.argv[1], sys.argv[2]
    chromium, driver_path = find_browser()
    os.makedirs(work_dir, exist_ok=True)
    driver = start_browser(chromium, driver_path)
    try:
        check_page(driver, brigade, work_dir)
        check_rules(driver, brigade)
    except Mismatch as e:
        print(f"FAILED: {e}")
        return 1
    finally:
        driver.quit()
    print("2 passed, 0 failed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
