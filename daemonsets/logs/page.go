package logs

// The page frame of the NodeManager's web UI (HtmlPage with its nav
// block), as a 3.4.1 NodeManager writes it; {{TITLE}} and {{RM}} are
// replaced, the content goes between pageHead and pageTail.
const pageHead = `<!DOCTYPE html PUBLIC "-//W3C//DTD HTML 4.01//EN" "http://www.w3.org/TR/html4/strict.dtd">
<html>
  <meta http-equiv="X-UA-Compatible" content="IE=8">
  <meta http-equiv="Content-type" content="text/html; charset=UTF-8">
  <title>
    {{TITLE}}
  </title>
  <link rel="stylesheet" href="/static/yarn.css">
  <style type="text/css">
    #layout { height: 100%; }
    #layout thead td { height: 3em; }
    #layout #navcell { width: 11em; padding: 0 1em; }
    #layout td.content { padding-top: 0 }
    #layout tbody { vertical-align: top; }
    #layout tfoot td { height: 4em; }
  </style>
  <link rel="stylesheet" href="/static/jquery/themes-1.9.1/base/jquery-ui.css">
  <link rel="stylesheet" href="/static/dt-1.11.5/css/jquery.dataTables.css">
  <link rel="stylesheet" href="/static/dt-1.11.5/css/jui-dt.css">
  <link rel="stylesheet" href="/static/dt-1.11.5/css/custom_datatable.css">
  <script type="text/javascript" src="/static/jquery/jquery-3.6.0.min.js">
  </script>
  <script type="text/javascript" src="/static/jquery/jquery-ui-1.13.2.custom.min.js">
  </script>
  <script type="text/javascript" src="/static/dt-1.11.5/js/jquery.dataTables.min.js">
  </script>
  <script type="text/javascript" src="/static/yarn.dt.plugins.js">
  </script>
  <script type="text/javascript" src="/static/dt-sorting/natural.js">
  </script>
  <style type="text/css">
    #jsnotice { padding: 0.2em; text-align: center; }
    .ui-progressbar { height: 1em; min-width: 5em }
  </style>
  <script type="text/javascript">
    $(function() {
      $('#nav').accordion({autoHeight:false, active:0});
    });
  </script>
  <div id="jsnotice" class="ui-state-error">
    This page will not function without javascript enabled. Please enable javascript on your browser.
  </div>
  <script type="text/javascript">
    $('#jsnotice').hide();
  </script>
  <table id="layout" class="ui-widget-content">
    <thead>
      <tr>
        <td colspan="2">
          <div id="header" class="ui-widget">
            <div id="user">
              
            </div>
            <div id="logo">
              <img src="/static/hadoop-st.png">
            </div>
            <h1>
              {{TITLE}}
            </h1>
          </div>
        </td>
      </tr>
    </thead>
    <tfoot>
      <tr>
        <td colspan="2">
          <div id="footer" class="ui-widget">
          </div>
        </td>
      </tr>
    </tfoot>
    <tbody>
      <tr>
        <td id="navcell">
          <div id="nav">
            <h3>
              ResourceManager
            </h3>
            <ul>
              <li>
                <a href="{{RM}}">RM Home</a>
            </ul>
            <h3>
              NodeManager
            </h3>
            <ul>
              <li>
                <a href="/node/node">Node Information</a>
              <li>
                <a href="/node/allApplications">List of Applications</a>
              <li>
                <a href="/node/allContainers">List of Containers</a>
            </ul>
            <h3>
              Tools
            </h3>
            <ul>
              <li>
                <a href="/conf">Configuration</a>
              <li>
                <a href="/logs">Local logs</a>
              <li>
                <a href="/stacks">Server stacks</a>
              <li>
                <a href="/jmx?qry=Hadoop:*">Server metrics</a>
            </ul>
          </div>
        </td>
        <td class="content">
`

const pageTail = `        </td>
      </tr>
    </tbody>
  </table>
</html>
`
