"""The chat playground's static files (index.html, app.js, markdown.js, style.css), served by
`appliance.api.playground`: plain files, no build step, no request to any other origin."""
