#include "report.h"

#include <errno.h>
#include <json-c/json.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "bench_stats.h"
#include "history.h"

#ifndef BENCH_DYGRAPHS_JS
#define BENCH_DYGRAPHS_JS "/usr/share/javascript/dygraphs/dygraph.min.js"
#endif

// Writes |text| into a <script> or <style> element: only "</script" or
// "</style" (any case) would end the element early, so their "</" is
// written as "<\/" (the same string in JavaScript and JSON; in a style
// sheet they never occur). Other "</" stay: in the charting library they
// are regular expressions such as /</g, which an escape would break.
static void write_raw(FILE *out, const char *text) {
  for (const char *p = text; *p; ++p) {
    if (p[0] == '<' && p[1] == '/' &&
        (strncasecmp(p + 2, "script", 6) == 0 ||
         strncasecmp(p + 2, "style", 5) == 0)) {
      fputs("<\\/", out);
      p++;
    } else {
      fputc(*p, out);
    }
  }
}

static json_object *number_or_null(double x) {
  return isfinite(x) ? json_object_new_double(x) : NULL;
}

// The figures' names over all runs, in the order they first appear, as
// objects {bench, name, unit, target, bound, judged, points: [[run, lo,
// mid, hi], ...]}.
static json_object *figures_json(const bench_run_t *runs, int run_count) {
  json_object *figures = json_object_new_array();
  json_object *index = json_object_new_object();  // "bench/name" -> figure
  for (int r = 0; r < run_count; ++r) {
    for (int i = 0; i < runs[r].count; ++i) {
      const bench_fig_t *f = &runs[r].figs[i];
      char key[256];
      snprintf(key, sizeof(key), "%s/%s", f->bench, f->name);
      json_object *fig = NULL;
      if (!json_object_object_get_ex(index, key, &fig)) {
        fig = json_object_new_object();
        json_object_object_add(fig, "bench", json_object_new_string(f->bench));
        json_object_object_add(fig, "name", json_object_new_string(f->name));
        json_object_object_add(fig, "unit",
                               json_object_new_string(f->unit ? f->unit : ""));
        json_object_object_add(
            fig, "judged",
            json_object_new_string(f->baseline_name != NULL ? "ratio"
                                                            : "value"));
        json_object_object_add(fig, "points", json_object_new_array());
        json_object_array_add(figures, fig);
        json_object_object_add(index, key, json_object_get(fig));
      }
      // The latest run's target is the one drawn.
      bench_target_t t;
      if (bench_target_parse(f->target, &t)) {
        json_object_object_add(fig, "target", json_object_new_string(f->target));
        json_object_object_add(fig, "bound", json_object_new_double(t.bound));
      }
      double mid = bench_fig_judged(f);
      if (!isfinite(mid)) {
        continue;
      }
      json_object *point = json_object_new_array();
      json_object_array_add(point, json_object_new_int(r));
      json_object_array_add(point, number_or_null(isfinite(f->ci_low) ? f->ci_low : mid));
      json_object_array_add(point, json_object_new_double(mid));
      json_object_array_add(point, number_or_null(isfinite(f->ci_high) ? f->ci_high : mid));
      json_object *points = NULL;
      json_object_object_get_ex(fig, "points", &points);
      json_object_array_add(points, point);
    }
  }
  json_object_put(index);
  return figures;
}

static json_object *runs_json(const bench_run_t *runs, int run_count) {
  json_object *list = json_object_new_array();
  for (int r = 0; r < run_count; ++r) {
    json_object *run = json_object_new_object();
    char short_commit[16];
    snprintf(short_commit, sizeof(short_commit), "%.7s", runs[r].commit);
    if (strstr(runs[r].commit, "-dirty") != NULL) {
      snprintf(short_commit, sizeof(short_commit), "%.7s+", runs[r].commit);
    }
    json_object_object_add(run, "commit", json_object_new_string(short_commit));
    json_object_object_add(run, "time", json_object_new_string(runs[r].time));
    json_object_object_add(run, "build",
                           json_object_new_string(runs[r].build_type));
    json_object_array_add(list, run);
  }
  return list;
}

// The page's own script: one Dygraph per figure (x: the run, labelled by
// its commit; the judged number with its 95% interval as error bars; the
// target as a line), then the count of charts drawn and points given, on
// <body> (data-charts, data-points), for tests and scripts to read.
static const char k_page_script[] =
    "(function () {\n"
    "  var data = JSON.parse(document.getElementById('data').textContent);\n"
    "  var runs = data.runs, root = document.getElementById('charts');\n"
    "  var drawn = 0, points = 0;\n"
    "  function commitOf(x) {\n"
    "    var r = runs[Math.round(x)];\n"
    "    return r && Math.abs(x - Math.round(x)) < 1e-6 ? r.commit : '';\n"
    "  }\n"
    "  data.figures.forEach(function (f) {\n"
    "    var box = document.createElement('section');\n"
    "    var h = document.createElement('h2');\n"
    "    h.textContent = f.bench + ' / ' + f.name + ' (' + f.judged +\n"
    "        (f.judged === 'value' ? ', ' + f.unit : '') +\n"
    "        (f.target ? ', target ' + f.target : '') + ')';\n"
    "    var div = document.createElement('div');\n"
    "    div.className = 'chart';\n"
    "    box.appendChild(h); box.appendChild(div); root.appendChild(box);\n"
    "    var hasTarget = typeof f.bound === 'number';\n"
    "    var rows = f.points.map(function (p) {\n"
    "      var row = [p[0], [p[1], p[2], p[3]]];\n"
    "      if (hasTarget) row.push([f.bound, f.bound, f.bound]);\n"
    "      return row;\n"
    "    });\n"
    "    if (rows.length === 0) return;\n"
    "    var labels = ['run', f.judged];\n"
    "    if (hasTarget) labels.push('target');\n"
    "    points += rows.length;\n"
    "    var g = new Dygraph(div, rows, {\n"
    "      customBars: true, labels: labels, drawPoints: true,\n"
    "      pointSize: 3, strokeWidth: 1.5, colors: ['#1f5fa8', '#c0392b'],\n"
    "      series: {target: {strokePattern: [6, 4], drawPoints: false}},\n"
    "      dateWindow: [-0.5, runs.length - 0.5], legend: 'always',\n"
    "      axes: {x: {pixelsPerLabel: 70, axisLabelFormatter: commitOf,\n"
    "                 valueFormatter: function (x) {\n"
    "                   var r = runs[x];\n"
    "                   return r ? r.commit + ' ' + r.time + ' ' + r.build : x;\n"
    "                 }}}\n"
    "    });\n"
    "    g.ready(function () {\n"
    "      drawn++;\n"
    "      document.body.setAttribute('data-charts', String(drawn));\n"
    "    });\n"
    "  });\n"
    "  document.body.setAttribute('data-points', String(points));\n"
    "  document.body.setAttribute('data-figures', String(data.figures.length));\n"
    "  if (!document.body.hasAttribute('data-charts'))\n"
    "    document.body.setAttribute('data-charts', '0');\n"
    "})();\n";

static const char k_page_style[] =
    "body { font: 14px sans-serif; margin: 1em 2em; color: #222; }\n"
    "h1 { font-size: 20px; } h2 { font-size: 15px; margin: 1.2em 0 0.3em; }\n"
    ".chart { width: 900px; height: 240px; }\n"
    "section { break-inside: avoid; }\n";

int bench_report_write(FILE *out, const bench_run_t *runs, int run_count,
                       const char *js, const char *css) {
  json_object *data = json_object_new_object();
  json_object_object_add(data, "runs", runs_json(runs, run_count));
  json_object *figures = figures_json(runs, run_count);
  int figure_count = (int)json_object_array_length(figures);
  json_object_object_add(data, "figures", figures);
  fprintf(out,
          "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n"
          "<title>accel-bench history</title>\n<style>\n");
  write_raw(out, css != NULL ? css : "");
  fputs(k_page_style, out);
  fputs("</style>\n<script>\n", out);
  write_raw(out, js);
  fprintf(out,
          "\n</script>\n</head><body>\n<h1>accel-bench history</h1>\n"
          "<p>%d runs, %d figures, oldest first. Each point is a run's "
          "median (of per-pair ratios, or of values) with its 95%% bootstrap "
          "interval; the dashed line is the target.</p>\n"
          "<div id=\"charts\"></div>\n"
          "<script type=\"application/json\" id=\"data\">",
          run_count, figure_count);
  write_raw(out, json_object_to_json_string_ext(data, JSON_C_TO_STRING_PLAIN));
  fputs("</script>\n<script>\n", out);
  fputs(k_page_script, out);
  fputs("</script>\n</body></html>\n", out);
  json_object_put(data);
  if (ferror(out)) {
    fprintf(stderr, "accel-bench report: write failed\n");
    return 1;
  }
  return 0;
}

// The style sheet beside |js_path| (dygraph.min.js -> dygraph.min.css), or
// NULL when there is none.
static char *read_css_beside(const char *js_path) {
  size_t n = strlen(js_path);
  if (n < 3 || strcmp(js_path + n - 3, ".js") != 0) {
    return NULL;
  }
  char *css_path = malloc(n + 2);
  if (css_path == NULL) {
    return NULL;
  }
  snprintf(css_path, n + 2, "%.*s.css", (int)(n - 3), js_path);
  FILE *probe = fopen(css_path, "r");
  char *css = NULL;
  if (probe != NULL) {
    fclose(probe);
    css = bench_read_file(css_path, NULL);
  }
  free(css_path);
  return css;
}

int accel_bench_report_main(int argc, char **argv) {
  const char *db = NULL, *out_path = NULL, *js_path = getenv("ACCEL_BENCH_DYGRAPHS");
  if (js_path == NULL || js_path[0] == '\0') {
    js_path = BENCH_DYGRAPHS_JS;
  }
  for (int i = 0; i < argc; ++i) {
    const char *next = i + 1 < argc ? argv[i + 1] : NULL;
    if (strcmp(argv[i], "--db") == 0 && next != NULL) {
      db = argv[++i];
    } else if (strcmp(argv[i], "--out") == 0 && next != NULL) {
      out_path = argv[++i];
    } else if (strcmp(argv[i], "--js") == 0 && next != NULL) {
      js_path = argv[++i];
    } else {
      db = NULL;
      break;
    }
  }
  if (db == NULL || out_path == NULL) {
    fprintf(stderr, "usage: accel-bench report --db DB --out FILE.html "
                    "[--js DYGRAPH_JS]\n");
    return 2;
  }
  FILE *probe = fopen(js_path, "r");
  if (probe == NULL) {
    fprintf(stderr, "accel-bench report: the charting library dygraphs is "
            "not at %s (Debian: libjs-dygraphs; or --js PATH, "
            "ACCEL_BENCH_DYGRAPHS)\n", js_path);
    return 1;
  }
  fclose(probe);
  char *js = bench_read_file(js_path, NULL);
  char *css = js != NULL ? read_css_beside(js_path) : NULL;
  bench_run_t *runs = NULL;
  int count = 0, rc = 1;
  if (js != NULL && bench_history_load_all(db, &runs, &count) == 0) {
    FILE *out = fopen(out_path, "w");
    if (out == NULL) {
      fprintf(stderr, "accel-bench report: cannot write %s: %s\n", out_path,
              strerror(errno));
    } else {
      rc = bench_report_write(out, runs, count, js, css);
      rc = fclose(out) != 0 || rc;
    }
    for (int i = 0; i < count; ++i) {
      bench_run_free(&runs[i]);
    }
    free(runs);
  }
  free(js);
  free(css);
  if (rc == 0) {
    fprintf(stderr, "accel-bench report: %d runs written to %s\n", count,
            out_path);
  }
  return rc;
}
