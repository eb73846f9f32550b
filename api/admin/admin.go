// Package admin is the admin API: the host platform (or an operator) keeps the
// directory and the organisation keys in step with its own, one record at a time. It is
// served on a listener of its own (AGENTFY_ADMIN_LISTEN), never beside the public
// routes, and takes admin keys only. Routes (JSON with the seed file's field names;
// every answer no-store, every error the public API's body, package answer):
//
//	PUT    /v1/admin/users/:id                  {"name"}                          200 the user
//	PUT    /v1/admin/teams/:id                  {"name"}                          200 the team
//	PUT    /v1/admin/orgs/:id                   {"name","environments"}           200 the organisation
//	GET    /v1/admin/teams/:id/members                                            200 {"members"}
//	PUT    /v1/admin/teams/:id/members          {"members"}                       200 {"added","removed"}
//	PUT    /v1/admin/teams/:id/members/:userId                                    204
//	DELETE /v1/admin/teams/:id/members/:userId                                    204
//	PUT    /v1/admin/agents/:id                 {"name","team","org","environment"} 200 the agent
//	DELETE /v1/admin/agents/:id                                                   204
//	POST   /v1/admin/orgs/:id/keys              {"environment","scopes"}          201 the key, shown once
//	GET    /v1/admin/orgs/:id/keys                                                200 {"keys"}, no secret
//	DELETE /v1/admin/orgs/:id/keys/:keyId                                         204
//	GET    /healthz, /openapi.yaml (the admin API's own document)
//
// Every change is made by package change (change.Changer), as the operator CLI makes
// it, and checked before anything is written: a refused change is a 4xx whose
// message names the field, and nothing changed. Every change that passes is written in
// the replica's log as one audit line and published as one audit event (package
// audit): the admin key's id, the action and the ids it touched, never a secret.
package admin

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"reflect"
	"slices"
	"strings"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
	"github.com/rs/zerolog"

	"github.com/agentfy/agentfy/api/answer"
	"github.com/agentfy/agentfy/audit"
	"github.com/agentfy/agentfy/auth"
	"github.com/agentfy/agentfy/change"
	"github.com/agentfy/agentfy/directory"
	"github.com/agentfy/agentfy/wire"
)

// Config wires a Server. Every field but JWT, OpenAPI and Audit is required.
type Config struct {
	Log   zerolog.Logger
	Creds *auth.Store
	Dir   *directory.Store
	// JWT verifies members' tokens, only to tell a member's JWT (403) from a string
	// that looks like one (401); nil answers every JWT 401.
	JWT *auth.Verifier
	// OpenAPI is the admin API's document, served at /openapi.yaml.
	OpenAPI []byte
	// Audit publishes each accepted change's event; nil publishes none.
	Audit *audit.Publisher
}

// Server is one replica's admin listener.
type Server struct {
	cfg Config
	eng *gin.Engine
	// change makes each change (change.Changer), as the operator CLI makes it.
	change change.Changer
}

// MaxBody bounds an admin request's body: a team's whole member list
// (directory.MaxMembers ids) fits.
const MaxBody = 1 << 20 // 1 MiB

const ctxAdminKey = "agentfy.adminkey"

// New builds the admin routes.
func New(cfg Config) *Server {
	gin.SetMode(gin.ReleaseMode)
	eng := gin.New()
	eng.HandleMethodNotAllowed = true
	eng.ContextWithFallback = true
	eng.RedirectTrailingSlash = false
	eng.RedirectFixedPath = false
	s := &Server{cfg: cfg, eng: eng, change: change.Changer{Dir: cfg.Dir, Creds: cfg.Creds}}
	eng.Use(s.requestLog, answer.NoStore, answer.Recovery(), answer.RefuseAmbiguous)
	eng.GET("/healthz", func(c *gin.Context) { c.JSON(http.StatusOK, gin.H{"ok": true}) })
	eng.GET("/openapi.yaml", func(c *gin.Context) { c.Data(http.StatusOK, "application/yaml", cfg.OpenAPI) })

	a := eng.Group("/v1/admin", s.authenticate)
	a.PUT("/users/:id", s.putUser)
	a.PUT("/teams/:id", s.putTeam)
	a.PUT("/orgs/:id", s.putOrg)
	a.GET("/teams/:id/members", s.getMembers)
	a.PUT("/teams/:id/members", s.putMembers)
	a.PUT("/teams/:id/members/:userId", s.addMember)
	a.DELETE("/teams/:id/members/:userId", s.removeMember)
	a.PUT("/agents/:id", s.putAgent)
	a.DELETE("/agents/:id", s.deleteAgent)
	a.POST("/orgs/:id/keys", s.createKey)
	a.GET("/orgs/:id/keys", s.listKeys)
	a.DELETE("/orgs/:id/keys/:keyId", s.revokeKey)

	answer.Unrouted(eng, answer.AdminNoRoute)
	return s
}

// Handler is the admin listener's http.Handler.
func (s *Server) Handler() http.Handler { return s.eng }

// requestLog logs each admin request's route, status and duration, never its token or
// body.
func (s *Server) requestLog(c *gin.Context) {
	start := time.Now()
	c.Next()
	route := c.FullPath()
	if route == "" {
		route = "unknown"
	}
	s.cfg.Log.Debug().Str("route", route).Str("method", c.Request.Method).Int("status", c.Writer.Status()).
		Dur("took", time.Since(start)).Msg("admin request")
}

// authenticate lets admin keys through. A credential of another kind — a member's
// JWT, an organisation key, a session pass — is refused with 403 once it verifies as
// one (the public routes and the worker channel say as much of it); anything else — a
// string only shaped like one, an unknown or revoked admin key, no credential — with
// 401, as openapi/admin.yaml says. A JWT that cannot be checked now (its identity
// provider does not answer) is not an admin key either: 401.
func (s *Server) authenticate(c *gin.Context) {
	ctx := c.Request.Context()
	token := auth.BearerToken(c.GetHeader("Authorization"))
	if !auth.IsAdminKeyToken(token) {
		if err := s.otherCredential(ctx, token); err != nil {
			s.abort(c, err)
			return
		}
		s.fail(c, answer.AdminOnly, nil)
		return
	}
	key, err := s.cfg.Creds.VerifyAdminKey(ctx, token)
	if err != nil {
		s.abort(c, err)
		return
	}
	c.Set(ctxAdminKey, key)
}

// otherCredential returns nil when token is a valid credential of another kind than an
// admin key (a member's JWT, an organisation key, a pass of either role),
// auth.ErrUnauthenticated when it is none, and a wrapped Redis error when that cannot
// be told.
func (s *Server) otherCredential(ctx context.Context, token string) error {
	switch {
	case auth.IsOrgKeyToken(token):
		_, err := s.cfg.Creds.VerifyOrgKey(ctx, token)
		return err
	case auth.IsPassToken(token):
		// A pass of either role is a pass: ErrForbidden says it is the other role's.
		if _, err := s.cfg.Creds.VerifyPass(ctx, token, auth.RoleWorker); err != nil && !errors.Is(err, auth.ErrForbidden) {
			return err
		}
		return nil
	case s.cfg.JWT != nil && strings.Count(token, ".") == 2:
		if _, err := s.cfg.JWT.Verify(ctx, token); err != nil {
			return auth.ErrUnauthenticated
		}
		return nil
	default:
		return auth.ErrUnauthenticated
	}
}

// audit writes the one log line of an accepted change and publishes its audit event
// (audit.Admin): the admin key's id, the action and the ids it touched, the log line's
// in the change's order.
func (s *Server) audit(c *gin.Context, ch change.Change) {
	key, _ := c.Get(ctxAdminKey)
	keyID := key.(auth.AdminKey).ID
	s.cfg.Log.Info().Bool("audit", true).Str("adminKey", keyID).Str("action", string(ch.Action)).Func(func(e *zerolog.Event) {
		for kind, id := range ch.All() {
			e.Str(kind, id)
		}
	}).Msg("admin change")
	s.cfg.Audit.Admin(c.Request.Context(), audit.Admin{Source: audit.SourceAdminAPI, AdminKey: keyID, Action: string(ch.Action), IDs: ch.Map()})
}

// abort renders err through the admin API's table (answer.Admin), logging what the
// client does not see of a 5xx.
func (s *Server) abort(c *gin.Context, err error) {
	e := answer.Admin(err)
	var internal error
	if e.Status >= http.StatusInternalServerError {
		internal = err // Redis: logged, never shown
	}
	s.fail(c, e, internal)
}

// fail answers e, logging internal first when it is not nil.
func (s *Server) fail(c *gin.Context, e answer.Error, internal error) {
	if internal != nil {
		s.cfg.Log.Warn().Err(internal).Str("route", c.FullPath()).Str("reason", e.Row().Reason).Msg("admin request failed")
	}
	answer.CloseIfBody(c)
	c.AbortWithStatusJSON(e.Status, e.Body())
}

// decode reads one JSON object of at most MaxBody bytes with wire.DecodeStrict: a
// member named in another case than the body's field, or given twice, or not a field
// at all, is refused (encoding/json would take "TEAM" for "team", and the last of two
// "team"s). A refused body is answered here (415, 413 or 400 naming the member or field
// that is wrong) and decode returns false.
func (s *Server) decode(c *gin.Context, v any) bool {
	if ct := c.ContentType(); !strings.EqualFold(ct, "application/json") {
		s.fail(c, answer.UnsupportedMediaType, nil)
		return false
	}
	b, err := wire.ReadAll(http.MaxBytesReader(c.Writer, c.Request.Body, MaxBody))
	var tooLarge *http.MaxBytesError
	switch {
	case errors.As(err, &tooLarge):
		s.fail(c, answer.AdminTooLarge, nil)
		return false
	case err != nil:
		s.fail(c, answer.AdminUnreadable, nil)
		return false
	}
	if err := wire.DecodeStrict(b, v); err != nil {
		s.fail(c, bodyError(err), nil)
		return false
	}
	return true
}

// bodyError is the 400 of a body that wire.DecodeStrict refused, naming the member at
// fault as the body wrote it (a JSON pointer's path, "environments/0"): a member that
// is not a field of the body (a case variant of one included), a member given twice,
// or a value of the wrong type. Anything else is "not one JSON object".
func bodyError(err error) answer.Error {
	var semantic *json.SemanticError
	var syntactic *jsontext.SyntacticError
	switch {
	case errors.Is(err, json.ErrUnknownName) && errors.As(err, &semantic):
		return answer.Invalid(fmt.Sprintf("%q: not a field of this body (names are matched exactly, case included)", member(semantic.JSONPointer)))
	case errors.Is(err, jsontext.ErrDuplicateName) && errors.As(err, &syntactic):
		return answer.Invalid(fmt.Sprintf("%q: given twice (a member may appear once)", member(syntactic.JSONPointer)))
	case errors.As(err, &semantic) && semantic.JSONPointer != "" && semantic.GoType != nil:
		return answer.Invalid(fmt.Sprintf("%s: must be %s", member(semantic.JSONPointer), jsonKind(semantic.GoType.Kind())))
	default:
		return answer.AdminNotAnObject
	}
}

// member is a JSON pointer ("/environments/0") as the path of names and indexes it
// stands for ("environments/0"), cut at maxMemberEcho bytes: the client wrote it, and
// an error echoes it.
func member(p jsontext.Pointer) string {
	m := strings.Join(slices.Collect(p.Tokens()), "/")
	if len(m) > maxMemberEcho {
		m = strings.ToValidUTF8(m[:maxMemberEcho], "") + "…"
	}
	return m
}

// maxMemberEcho bounds the name of a member that an error message quotes.
const maxMemberEcho = 100

func jsonKind(k reflect.Kind) string {
	switch k {
	case reflect.Slice, reflect.Array:
		return "an array"
	case reflect.String:
		return "a string"
	default:
		return "of another type"
	}
}

// pathID checks a path parameter with directory's id rule, answering 400 naming it.
func (s *Server) pathID(c *gin.Context, param, field string) (string, bool) {
	id := c.Param(param)
	if !directory.ValidID(id) {
		s.fail(c, answer.Invalid(field+": must be 1 to 64 of A-Z, a-z, 0-9, '_' and '-'"), nil)
		return "", false
	}
	return id, true
}

type nameBody struct {
	Name string `json:"name"`
}

// putUser serves PUT /v1/admin/users/:id.
func (s *Server) putUser(c *gin.Context) {
	id, ok := s.pathID(c, "id", "id")
	var body nameBody
	if !ok || !s.decode(c, &body) {
		return
	}
	ch, err := s.change.PutUser(c.Request.Context(), directory.User{ID: id, Name: body.Name})
	if err != nil {
		s.abort(c, err)
		return
	}
	s.audit(c, ch)
	c.JSON(http.StatusOK, gin.H{"id": id, "name": body.Name})
}

// putTeam serves PUT /v1/admin/teams/:id.
func (s *Server) putTeam(c *gin.Context) {
	id, ok := s.pathID(c, "id", "id")
	var body nameBody
	if !ok || !s.decode(c, &body) {
		return
	}
	ch, err := s.change.PutTeam(c.Request.Context(), directory.Team{ID: id, Name: body.Name})
	if err != nil {
		s.abort(c, err)
		return
	}
	s.audit(c, ch)
	c.JSON(http.StatusOK, gin.H{"id": id, "name": body.Name})
}

// putOrg serves PUT /v1/admin/orgs/:id.
func (s *Server) putOrg(c *gin.Context) {
	id, ok := s.pathID(c, "id", "id")
	var body struct {
		Name         string   `json:"name"`
		Environments []string `json:"environments"`
	}
	if !ok || !s.decode(c, &body) {
		return
	}
	o := directory.Org{ID: id, Name: body.Name, Environments: body.Environments}
	ch, err := s.change.PutOrg(c.Request.Context(), o)
	if err != nil {
		s.abort(c, err)
		return
	}
	s.audit(c, ch)
	c.JSON(http.StatusOK, o)
}

// getMembers serves GET /v1/admin/teams/:id/members.
func (s *Server) getMembers(c *gin.Context) {
	id, ok := s.pathID(c, "id", "team")
	if !ok {
		return
	}
	m, err := s.cfg.Dir.Members(c.Request.Context(), id)
	if errors.Is(err, directory.ErrNotFound) {
		s.fail(c, answer.Missing(fmt.Sprintf("team: no team %q", id)), nil)
		return
	}
	if err != nil {
		s.abort(c, err)
		return
	}
	c.JSON(http.StatusOK, gin.H{"members": m})
}

// putMembers serves PUT /v1/admin/teams/:id/members: the whole member list.
func (s *Server) putMembers(c *gin.Context) {
	id, ok := s.pathID(c, "id", "team")
	var body struct {
		Members []string `json:"members"`
	}
	if !ok || !s.decode(c, &body) {
		return
	}
	if body.Members == nil {
		s.fail(c, answer.Invalid("members: is required (an empty array removes everyone)"), nil)
		return
	}
	ch, added, removed, err := s.change.SetMembers(c.Request.Context(), id, body.Members)
	if err != nil {
		s.abort(c, err)
		return
	}
	s.audit(c, ch)
	c.JSON(http.StatusOK, gin.H{"added": nonNil(added), "removed": nonNil(removed)})
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// addMember serves PUT /v1/admin/teams/:id/members/:userId.
func (s *Server) addMember(c *gin.Context) { s.membership(c, true) }

// removeMember serves DELETE /v1/admin/teams/:id/members/:userId.
func (s *Server) removeMember(c *gin.Context) { s.membership(c, false) }

// membership adds or removes one member; both are idempotent (204).
func (s *Server) membership(c *gin.Context, add bool) {
	team, ok := s.pathID(c, "id", "team")
	if !ok {
		return
	}
	user, ok := s.pathID(c, "userId", "user")
	if !ok {
		return
	}
	apply := s.change.RemoveMember
	if add {
		apply = s.change.AddMember
	}
	ch, err := apply(c.Request.Context(), team, user)
	if err != nil {
		s.abort(c, err)
		return
	}
	s.audit(c, ch)
	c.Status(http.StatusNoContent)
}

// putAgent serves PUT /v1/admin/agents/:id: creates an agent or moves it.
func (s *Server) putAgent(c *gin.Context) {
	id, ok := s.pathID(c, "id", "id")
	var body struct {
		Name        string `json:"name"`
		Team        string `json:"team"`
		Org         string `json:"org"`
		Environment string `json:"environment"`
	}
	if !ok || !s.decode(c, &body) {
		return
	}
	a := directory.Agent{ID: id, Name: body.Name, TeamID: body.Team, OrgID: body.Org, Environment: body.Environment}
	ch, _, err := s.change.PutAgent(c.Request.Context(), a)
	if err != nil {
		s.abort(c, err)
		return
	}
	s.audit(c, ch)
	c.JSON(http.StatusOK, a)
}

// deleteAgent serves DELETE /v1/admin/agents/:id.
func (s *Server) deleteAgent(c *gin.Context) {
	id, ok := s.pathID(c, "id", "id")
	if !ok {
		return
	}
	ch, err := s.change.DeleteAgent(c.Request.Context(), id)
	if err != nil {
		s.abort(c, err)
		return
	}
	s.audit(c, ch)
	c.Status(http.StatusNoContent)
}

// orgKeyJSON is an organisation key as the admin API shows it: never its secret.
type orgKeyJSON struct {
	ID          string    `json:"id"`
	Org         string    `json:"org"`
	Environment string    `json:"environment"`
	Scopes      []string  `json:"scopes"`
	CreatedAt   time.Time `json:"createdAt"`
}

func orgKeyOf(k auth.OrgKey) orgKeyJSON {
	return orgKeyJSON{ID: k.ID, Org: k.OrgID, Environment: k.Environment, Scopes: k.Scopes, CreatedAt: k.CreatedAt.UTC()}
}

// createKey serves POST /v1/admin/orgs/:id/keys. The key is in this answer only.
func (s *Server) createKey(c *gin.Context) {
	org, ok := s.pathID(c, "id", "org")
	var body struct {
		Environment string   `json:"environment"`
		Scopes      []string `json:"scopes"`
	}
	if !ok || !s.decode(c, &body) {
		return
	}
	if len(body.Scopes) == 0 || len(body.Scopes) > auth.MaxScopes {
		s.fail(c, answer.Invalid(fmt.Sprintf("scopes: must list 1 to %d scopes", auth.MaxScopes)), nil)
		return
	}
	for _, sc := range body.Scopes {
		if !auth.ValidScope(sc) {
			s.fail(c, answer.Invalid(fmt.Sprintf("scopes: bad scope %q", sc)), nil)
			return
		}
	}
	ch, token, key, err := s.change.CreateOrgKey(c.Request.Context(), change.OrgKeyRequest{
		Org: org, Environment: body.Environment, Scopes: body.Scopes,
		OrgField: "org", EnvironmentField: "environment",
	})
	if err != nil {
		s.abort(c, err)
		return
	}
	s.audit(c, ch)
	c.JSON(http.StatusCreated, struct {
		orgKeyJSON
		Key string `json:"key"`
	}{orgKeyOf(key), token})
}

// listKeys serves GET /v1/admin/orgs/:id/keys.
func (s *Server) listKeys(c *gin.Context) {
	org, ok := s.pathID(c, "id", "org")
	if !ok {
		return
	}
	ctx := c.Request.Context()
	if _, err := s.cfg.Dir.Org(ctx, org); errors.Is(err, directory.ErrNotFound) {
		s.fail(c, answer.Missing(fmt.Sprintf("org: no organisation %q", org)), nil)
		return
	} else if err != nil {
		s.abort(c, err)
		return
	}
	keys, err := s.cfg.Creds.ListOrgKeys(ctx, org)
	if err != nil {
		s.abort(c, err)
		return
	}
	out := make([]orgKeyJSON, len(keys))
	for i, k := range keys {
		out[i] = orgKeyOf(k)
	}
	c.JSON(http.StatusOK, gin.H{"keys": out})
}

// revokeKey serves DELETE /v1/admin/orgs/:id/keys/:keyId: the key's next request is
// refused. Revoking a key that is gone (or not this organisation's) changes nothing.
func (s *Server) revokeKey(c *gin.Context) {
	org, ok := s.pathID(c, "id", "org")
	if !ok {
		return
	}
	id := c.Param("keyId")
	if !auth.ValidKeyID(id) {
		s.fail(c, answer.Invalid("keyId: must be 16 lowercase hex digits"), nil)
		return
	}
	ch, deleted, err := s.change.RevokeOrgKey(c.Request.Context(), org, id)
	if err != nil {
		s.abort(c, err)
		return
	}
	if deleted {
		s.audit(c, ch)
	}
	c.Status(http.StatusNoContent)
}
