import AppServerAudit
import CCSEngine
import CCSProtocol
import PushDomain
import FaultInjection
import Hummingbird

/// Fault rules and the app-server audit (docs/admin-api.md, docs/conformance.md).
extension AdminAPI {
    func addConformanceRoutes(to v1: RouterGroup<some RequestContext>) {
        v1.post("faults") { request, _ in
            let fields = try await Self.jsonBody(request)
            let rule: FaultRule
            do {
                rule = try FaultRule(json: .object(fields), defaultID: self.engine.faults.nextRuleID())
            } catch let error as FaultRuleError {
                throw APIError.badRequest("invalid fault rule: \(error.description)")
            }
            do { try await self.engine.putFaultRule(rule) } catch let error as DeviceManagementError { throw Self.apiError(error) }
            return JSONResponse.make(status: .created, self.faultStatus(rule.id) ?? rule.json)
        }
        v1.get("faults") { _, _ in
            JSONResponse.make(.object(["rules": .array(self.engine.faults.statusJSON)]))
        }
        v1.delete("faults") { _, _ in
            let count = self.engine.faults.rules.count
            do { try await self.engine.removeAllFaultRules() } catch let error as DeviceManagementError { throw Self.apiError(error) }
            return JSONResponse.make(.object(["removed": .int(Int64(count))]))
        }
        v1.delete("faults/:id") { _, context in
            let id = try context.parameters.require("id")
            let removed: Bool
            do { removed = try await self.engine.removeFaultRule(id: id) } catch let error as DeviceManagementError { throw Self.apiError(error) }
            guard removed else { throw APIError.notFound("no fault rule with id \(id)") }
            return JSONResponse.make(.object(["id": .string(id), "removed": .bool(true)]))
        }
        v1.get("faults/log") { request, _ in
            let query = request.uri.queryParameters
            var entries = self.engine.faults.log
            if let rule = query.get("rule") { entries = entries.filter { $0.ruleID == rule } }
            if let since = query.get("since") {
                guard let t = Int64(since) else { throw APIError.badRequest("\"since\" must be milliseconds since the epoch") }
                entries = entries.filter { $0.at >= t }
            }
            return JSONResponse.make(.object(["faults": .array(entries.map(\.json)),
                                              "kept": .int(Int64(self.engine.faults.logCapacity))]))
        }
        v1.get("audit") { request, _ in
            JSONResponse.make(self.engine.audit.report(sender: request.uri.queryParameters.get("sender")))
        }
        v1.delete("audit") { request, _ in
            let sender = request.uri.queryParameters.get("sender").map { String($0) }
            self.engine.audit.reset(sender: sender)
            self.engine.faults.clearLog()
            return JSONResponse.make(.object(["reset": .bool(true)]))
        }
    }

    func faultStatus(_ id: String) -> JSONValue? {
        engine.faults.statusJSON.first { $0["id"] == .string(id) }
    }
}
