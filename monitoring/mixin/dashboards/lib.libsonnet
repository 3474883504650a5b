// A few helpers to write Grafana dashboards in plain jsonnet (no grafonnet:
// see README.md). Panels are laid out row by row; ids and gridPos are
// computed, so a dashboard lists rows of panels and nothing else.
{
  datasource:: { type: 'prometheus', uid: '${datasource}' },

  target(expr, legend='', instant=false):: {
    datasource: $.datasource,
    expr: expr,
    legendFormat: legend,
    refId: 'A',
    [if instant then 'instant']: true,
  },

  local panel(type, title, description, targets, unit, w) = {
    type: type,
    title: title,
    description: description,
    datasource: $.datasource,
    targets: [targets[i] { refId: std.char(std.codepoint('A') + i) } for i in std.range(0, std.length(targets) - 1)],
    fieldConfig: { defaults: { unit: unit }, overrides: [] },
    w:: w,
  },

  timeseries(title, description, targets, unit='short', w=8, stack=false)::
    panel('timeseries', title, description, targets, unit, w) {
      fieldConfig+: { defaults+: { custom: { drawStyle: 'line', lineWidth: 1, fillOpacity: if stack then 30 else 10, stacking: { mode: if stack then 'normal' else 'none' } } } },
      options: { legend: { displayMode: 'table', placement: 'bottom', calcs: ['lastNotNull', 'max'] }, tooltip: { mode: 'multi', sort: 'desc' } },
    },

  stat(title, description, targets, unit='short', w=4, thresholds=[{ color: 'green', value: null }])::
    panel('stat', title, description, targets, unit, w) {
      fieldConfig+: { defaults+: { thresholds: { mode: 'absolute', steps: thresholds } } },
      options: { reduceOptions: { calcs: ['lastNotNull'], fields: '', values: false }, colorMode: 'background', graphMode: 'none', textMode: 'auto' },
    },

  table(title, description, targets, w=12)::
    panel('table', title, description, targets, 'short', w) {
      options: { showHeader: true },
      transformations: [{ id: 'merge', options: {} }],
    },

  row(title, panels):: { title: title, panels: panels },

  // layout turns rows of panels into Grafana's flat panel list: a row panel,
  // then its panels left to right, wrapping at 24 columns, 8 high.
  layout(rows)::
    local h = 8;
    local placeRow(acc, r) =
      local rowPanel = { type: 'row', title: r.title, collapsed: false, panels: [], gridPos: { x: 0, y: acc.y, w: 24, h: 1 } };
      local placed = std.foldl(
        function(a, p)
          local wrap = a.x + p.w > 24;
          local x = if wrap then 0 else a.x;
          local y = if wrap then a.y + h else a.y;
          { x: x + p.w, y: y, panels: a.panels + [p { gridPos: { x: x, y: y, w: p.w, h: h } }] },
        r.panels,
        { x: 0, y: acc.y + 1, panels: [] },
      );
      { y: placed.y + h, panels: acc.panels + [rowPanel] + placed.panels };
    local all = std.foldl(placeRow, rows, { y: 0, panels: [] }).panels;
    [all[i] { id: i + 1 } for i in std.range(0, std.length(all) - 1)],

  dashboard(uid, title, description, config, rows, templating=[]):: {
    uid: uid,
    title: title,
    description: description,
    tags: config.dashboardTags,
    timezone: config.dashboardTimezone,
    refresh: config.dashboardRefresh,
    schemaVersion: 39,
    version: 1,
    editable: true,
    graphTooltip: 1,
    time: { from: 'now-6h', to: 'now' },
    annotations: { list: [] },
    links: [],
    templating: {
      list: [
        {
          name: 'datasource',
          label: 'Data source',
          type: 'datasource',
          query: 'prometheus',
          current: { text: 'default', value: 'default' },
          hide: 0,
          refresh: 1,
        },
      ] + templating,
    },
    panels: $.layout(rows),
  },

  // queryVariable is a multi-value variable from label_values(query, label).
  queryVariable(name, label, query):: {
    name: name,
    label: label,
    type: 'query',
    datasource: $.datasource,
    query: { query: query, refId: name },
    definition: query,
    refresh: 2,
    multi: true,
    includeAll: true,
    allValue: '.*',
    current: { text: 'All', value: '$__all' },
    sort: 1,
    hide: 0,
  },
}
