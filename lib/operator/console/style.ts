/** The console's one stylesheet, inlined into every page (the pages use no JavaScript). */
export const STYLESHEET = `
*{box-sizing:border-box}
body{margin:0;font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;color:#1d232b;background:#f6f7f9}
header{display:flex;flex-wrap:wrap;gap:1rem;align-items:center;padding:.6rem 1.2rem;background:#1d2733;color:#fff}
header a{color:#fff;text-decoration:none;font-weight:600}
header nav{display:flex;gap:1rem}
header form{margin-left:auto;display:flex;gap:.4rem}
header input{width:24rem;max-width:50vw;padding:.3rem .5rem;border:1px solid #8b96a3;border-radius:4px}
header button{padding:.3rem .8rem;border:0;border-radius:4px;background:#4a7bd0;color:#fff;cursor:pointer}
main{padding:1rem 1.2rem 3rem;max-width:1400px}
h1{font-size:1.35rem;margin:.2rem 0 .8rem}
h2{font-size:1.1rem;margin:1.6rem 0 .5rem}
h3{font-size:.95rem;margin:1rem 0 .3rem}
a{color:#1f5fbf}
code,.mono{font-family:ui-monospace,SFMono-Regular,Menlo,Consolas,monospace;font-size:.9em}
.table-wrap{max-width:100%;overflow-x:auto}
td code{white-space:nowrap}
table{border-collapse:collapse;background:#fff;margin:.3rem 0 1rem;min-width:20rem}
th,td{border:1px solid #d7dce2;padding:.25rem .55rem;text-align:left;vertical-align:top}
th{background:#eef1f4;font-weight:600}
td.num{text-align:right;font-variant-numeric:tabular-nums}
tr.alert td{background:#fdecea}
.muted{color:#67717d}
.none{color:#67717d;font-style:italic}
.lacking{border:1px dashed #b9c1ca;border-radius:6px;padding:.3rem .8rem;margin:0 0 1rem;color:#3b4450}
.lacking p{margin:.2rem 0}
.lacking ul{margin:.2rem 0;padding-left:1.2rem}
.facts{display:flex;flex-wrap:wrap;gap:.4rem 1.4rem;margin:0 0 1rem;padding:0;list-style:none}
.facts li span{color:#67717d}
.cards{display:grid;grid-template-columns:repeat(auto-fit,minmax(16rem,1fr));grid-auto-flow:row dense;gap:.8rem}
.card.wide{grid-column:1/-1}
.card{background:#fff;border:1px solid #d7dce2;border-radius:6px;padding:.5rem .8rem;overflow-wrap:anywhere}
.card h3{margin-top:.2rem}
.card.attention{border-color:#c62828}
.badge{display:inline-block;padding:0 .45rem;border-radius:9px;font-size:.8em;font-weight:600;background:#e4e7eb}
.status-COMPLETED{background:#d3f0d8;color:#1b5e20}
.status-RUNNING{background:#d6e6fb;color:#0d47a1}
.status-FAILED{background:#f9d4d2;color:#8e1b1b}
.status-PARTIAL,.status-DEGRADED{background:#fbe7bf;color:#7a4a00}
.status-NEEDS_HUMAN{background:#e8dcf5;color:#4a2372}
.status-BLOCKED{background:#ffe0b2;color:#8a3c00}
ul.tree,ul.tree ul{list-style:none;margin:0;padding-left:1.4rem;border-left:1px dashed #b9c1ca}
ul.tree{padding-left:0;border-left:0}
ul.tree li{margin:.35rem 0}
.event{background:#fff;border:1px solid #d7dce2;border-radius:6px;padding:.35rem .6rem;display:inline-block;min-width:36rem}
.event-head{display:flex;flex-wrap:wrap;gap:.2rem .8rem;align-items:baseline}
.event-type{font-weight:700}
.event ul{list-style:none;padding:0;margin:.25rem 0 0}
.event ul li{margin:.1rem 0}
ul.tree .event ul.details{border-left:0;padding-left:.8rem}
.outcome{display:inline-block;padding:0 .4rem;border-radius:4px;font-size:.9em}
.outcome-applied{background:#d3f0d8}
.outcome-discarded{background:#e4e4e4}
.outcome-rejected{background:#fbe7bf}
.outcome-retrying{background:#d6e6fb}
.outcome-dead-lettered{background:#f9d4d2;font-weight:600}
.dag{overflow-x:auto;background:#fff;border:1px solid #d7dce2;border-radius:6px;padding:.5rem}
.legend{display:flex;flex-wrap:wrap;gap:.3rem 1rem;list-style:none;padding:0;margin:.5rem 0}
.swatch{display:inline-block;width:1rem;height:.8rem;border:2px solid;border-radius:3px;vertical-align:middle;margin-right:.3rem}
.flash{border:1px solid;border-radius:6px;padding:.5rem .8rem;margin:0 0 1rem;overflow-wrap:anywhere}
.flash-sent{background:#e6f4ea;border-color:#2e7d32}
.flash-unchanged{background:#eef1f4;border-color:#8b96a3}
.flash-refused,.flash-failed{background:#fdecea;border-color:#c62828}
.forms{display:flex;flex-wrap:wrap;gap:.8rem;align-items:flex-start}
.forms form.action{flex:1 1 22rem}
form.action{background:#fff;border:1px solid #d7dce2;border-radius:6px;padding:.5rem .7rem;margin:.4rem 0;display:flex;flex-direction:column;gap:.4rem;max-width:46rem}
form.action label{display:flex;flex-direction:column;gap:.15rem;font-size:.9em;color:#3b4450}
form.action input[type=text],form.action select,form.action textarea{padding:.3rem .45rem;border:1px solid #8b96a3;border-radius:4px;font:inherit;color:#1d232b}
form.action textarea{font-family:ui-monospace,SFMono-Regular,Menlo,Consolas,monospace;font-size:.85em}
form.action .buttons{display:flex;flex-wrap:wrap;gap:.4rem}
form.action button{padding:.3rem .8rem;border:0;border-radius:4px;background:#4a7bd0;color:#fff;cursor:pointer}
form.tenant-filter{display:flex;align-items:center;gap:.5rem;margin:.2rem 0 .8rem}
form.tenant-filter input{padding:.25rem .45rem;border:1px solid #8b96a3;border-radius:4px;font:inherit}
form.tenant-filter input:invalid{border-color:#c62828}
details summary{cursor:pointer;color:#1f5fbf}
.agent-wait{border-top:1px solid #e4e7eb;margin:.3rem 0 .6rem;padding-top:.2rem}
.agent-wait p{margin:.25rem 0}
pre.json{max-width:46rem;background:#f6f7f9;border:1px solid #d7dce2;border-radius:4px;padding:.35rem .5rem;margin:.25rem 0;max-height:18rem;overflow:auto;white-space:pre-wrap;font-size:.85em}
.error-box{background:#fdecea;border:1px solid #c62828;border-radius:6px;padding:.6rem .8rem;white-space:pre-wrap}
`;
