// The OpenAPI page: Swagger UI (served from this server) over /openapi.json.
"use strict";
document.addEventListener("DOMContentLoaded", () => {
  // eslint-disable-next-line no-undef
  window.ui = SwaggerUIBundle({
    url: "/openapi.json",
    dom_id: "#swagger-ui",
    deepLinking: true,
    persistAuthorization: false,
  });
});
